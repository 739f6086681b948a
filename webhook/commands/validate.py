"""``draguard validate``: the API server's verdict on manifests, without a cluster or against one.

Every document is read as a Kubernetes 1.36 API server reads it (:mod:`policies.reading`: strict
decoding, versions served as ``--api-versions`` (its ``--runtime-config``) says, older DRA versions
converted, workloads' pod templates checked as pods, of other kinds only the metadata, with one
note per kind), then each object is validated as the create ``kubectl apply`` would make
(:mod:`policies.validation.documents`): validate judges documents as new. For a selector a create
refuses, a warning says whether an object already stored with it keeps working; the same object
in two documents is a warning naming both (``kubectl apply`` applies both). One line per problem,
prefixed with where the object is and what it is, so that the output reads like kubectl's and can
be grepped::

    c.yaml: document 2: ResourceClaim team-a/big: spec.devices.requests[0].exactly.count: Invalid value:
    -1: must be greater than zero

(one line in the output, wrapped here).

Given ResourceSlices and DeviceClasses (a picture of the cluster), it also says what ``audit``
and the webhook would warn about the classes, claims and templates among them: selectors that
match no device, attribute names no device publishes (with the closest one), classes that do not
exist (``--strict`` fails on those).

Given a cluster (``--kubeconfig``/``--context``, read-only: :mod:`webhook.cluster`), each document
is judged as ``kubectl apply`` would send it there: an update of the object stored when there is
one, a create otherwise, in a namespace that must exist, whose labels say whether admin access is
allowed; the selector warnings are the webhook's, against the cluster's devices.

Exit codes: 0 every object is valid, 1 any object is invalid or any file cannot be read (the
others are still checked), 2 nothing could be read at all, or bad options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from policies.api.base import TypedObject
from policies.api.core import Namespace, Pod
from policies.api.defaults import apply_defaults
from policies.api.resource import ADMIN_ACCESS_LABEL, ResourceSlice
from policies.outputs import ValidatedObject, ValidateReport, ValidateSummary
from policies.priority import Priorities
from policies.reading import Reading
from policies.validation.documents import Identity, identity, judge, selector_notes, template_refusal
from policies.validation.validate import NAMESPACE_UNKNOWN
from webhook.commands import add_command
from webhook.commands.common import (
    UsageError,
    add_cluster,
    add_file_flags,
    add_namespace,
    add_output,
    add_reading_flags,
    connect_cluster,
    default_namespace,
    print_notes,
    read_inputs,
    style,
    wants_cluster,
)
from webhook.manifests import Entry, applied_twice, duplicated
from webhook.output import PLAIN, RED, YELLOW, Progress, Style, dump, plural

if TYPE_CHECKING:  # the Kubernetes client is imported only when a cluster is asked
    from webhook.cluster import Cluster, Known, Listed

DESCRIPTION = """\
Validate manifests offline as a Kubernetes 1.36 API server would on 'kubectl apply': strict
decoding (unknown and duplicate fields), older resource.k8s.io versions refused or converted
(--api-versions takes the API server's --runtime-config entries), then the API server's
validation of DRA objects, PriorityClasses, pods (first admitted by its Priority plugin against
the input's PriorityClasses) and workloads' pod templates, as it judges their create; of other
kinds only the metadata is checked, with one note per kind. One line per problem, with the file,
the document, the object and the field:

  claims.yaml: document 2: ResourceClaim team-a/big: spec.devices.requests[0].exactly.count:
  Invalid value: -1: must be greater than zero

Warnings follow: what a refused selector means for an object the cluster already holds (kube-
scheduler evaluates stored selectors in the stored-expressions environment), the same object in
two documents (kubectl apply applies both, the second as an update), and, given ResourceSlices and
DeviceClasses (a picture of the cluster), what audit and the webhook warn about: selectors that
match no device, attribute names no device publishes and classes that do not exist (--strict fails
on warnings).

Given a cluster (--kubeconfig FILE or --context NAME; read-only, never written to), each document
is judged as 'kubectl apply' would send it there: an update of the stored object when one exists
(immutable fields, selectors left unchanged checked as stored, status kept), a create otherwise;
the namespace must exist and its labels decide admin access; the selector warnings are the
webhook's, against the cluster's devices. Documents naming no namespace go to -n, else the
context's namespace, else default.

Exit codes: 0 every object is valid, 1 some object is invalid or some file cannot be read (the
others are still checked), 2 nothing could be read at all, or bad options."""


@dataclass
class Result:
    """What was found about one document, or about a file that could not be read (``kind`` and
    ``name`` empty, the problem naming the file)."""

    where: str
    kind: str
    name: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unreadable: bool = False
    update: bool = False  # judged as an update of a stored object (--old, or the cluster's)
    metadata_only: bool = False

    @property
    def label(self) -> str:
        if self.unreadable:
            return "error"
        return f"{self.where}: {self.kind or '<no kind>'} {self.name or '<no name>'}"


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "validate", DESCRIPTION)
    add_file_flags(parser)
    parser.add_argument(
        "--old",
        dest="old",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE_OR_DIR",
        help="the objects as stored in the cluster: matching objects (same kind, "
        "namespace and name) are validated as updates of these",
    )
    parser.add_argument(
        "--namespace-labels",
        dest="namespace_labels",
        action="append",
        default=[],
        metavar="NS:KEY=VALUE[,KEY=VALUE]",
        help="labels of a namespace, for the adminAccess rule; Namespace objects in the input count as well",
    )
    add_cluster(parser, "judge the documents against (only when this or --context is given)")
    add_namespace(parser)
    add_reading_flags(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) on warnings too: selectors matching no device, misspelled attribute names",
    )
    add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        labels = parse_namespace_labels(args.namespace_labels)
        if args.old and wants_cluster(args):
            raise UsageError("give --old (stored objects in files) or a cluster (--kubeconfig, --context)")
        cluster = connect_cluster(args)
        entries = read_inputs(args, namespace=default_namespace(args, cluster))
        old_entries = read_inputs(args, args.old)
        unread = [f"--old: {e.problem}" for e in old_entries if e.reading is None]
        if unread:
            raise UsageError("; ".join(unread))
        known, listed = _ask(cluster, entries) if cluster is not None else (None, None)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    read_any = any(e.reading is not None for e in entries)
    if not read_any:
        for entry in entries:
            print(f"error: {entry.problem}", file=sys.stderr)
        if not entries or all(e.problem is None for e in entries):
            print(f"error: no objects found in {', '.join(args.files)}", file=sys.stderr)
        return 2
    print_notes(entries, sys.stderr)
    with Progress("validate") as progress:
        results = check(
            entries,
            old_entries,
            labels,
            allow_privileged=args.allow_privileged,
            progress=progress,
            known=known,
            listed=listed,
        )
    if cluster is not None:
        updates = sum(r.update for r in results)
        print(
            f"note: judged against the cluster of {cluster.where}: {plural(updates, 'update')} of a stored "
            f"object, {plural(len(results) - updates, 'create')}",
            file=sys.stderr,
        )
    if args.output == "table":
        print_text(results, sys.stdout, style(args))
    else:
        dump(to_json(results), args.output, sys.stdout)
    failed = any(r.errors for r in results) or (args.strict and any(r.warnings for r in results))
    return 1 if failed else 0


def parse_namespace_labels(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``team-a:resource.kubernetes.io/admin-access=true,env=prod`` -> {"team-a": {...}}."""
    result: dict[str, dict[str, str]] = {}
    for value in values:
        namespace, sep, pairs = value.partition(":")
        if not sep or not namespace:
            raise UsageError(f"--namespace-labels {value!r}: expected NAMESPACE:KEY=VALUE[,KEY=VALUE]")
        labels = result.setdefault(namespace, {})
        for pair in filter(None, pairs.split(",")):
            key, eq, label = pair.partition("=")
            if not eq or not key:
                raise UsageError(f"--namespace-labels {value!r}: {pair!r} is not KEY=VALUE")
            labels[key] = label
    return result


# What the selector warnings and the Priority plugin read of a cluster.
_WARNING_KINDS = ("DeviceClass", "ResourceSlice", "DeviceTaintRule")
_PRIORITY_KINDS = ("PriorityClass",)


def _ask(cluster: Cluster, entries: Sequence[Entry]) -> tuple[Known, Listed | None]:
    """What the cluster holds of the documents, and (listed when the documents need them) its
    devices and classes for the selector warnings and its PriorityClasses for pods; UsageError
    with the cluster's one line when it cannot be read."""
    from webhook.cluster import ClusterError

    readings = [e.reading for e in entries if e.reading is not None and e.reading.obj is not None]
    kinds: tuple[str, ...] = ()
    if any(r.kind in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate") for r in readings):
        kinds += _WARNING_KINDS
    if any(r.kind == "PriorityClass" or isinstance(r.obj, Pod) for r in readings):
        kinds += _PRIORITY_KINDS
    try:
        return cluster.known(readings), cluster.listed(kinds) if kinds else None
    except ClusterError as err:
        raise UsageError(str(err)) from None


def _stored(entries: Sequence[Entry]) -> dict[Identity, TypedObject]:
    found: dict[Identity, TypedObject] = {}
    for entry in entries:
        key = identity(entry.reading) if entry.reading is not None else None
        if key is not None and entry.reading is not None and entry.reading.obj is not None:
            found[key] = entry.reading.obj
    return found


def check(
    entries: Sequence[Entry],
    old_entries: Sequence[Entry],
    given_labels: Mapping[str, dict[str, str]],
    *,
    allow_privileged: bool = True,
    progress: Callable[[int, int], None] | None = None,
    known: Known | None = None,
    listed: Listed | None = None,
) -> list[Result]:
    """A result per document checked and per file that could not be read; objects in --old files
    (or ``known`` to a cluster) only serve as the stored versions, unchecked; ``listed``: the
    cluster's devices, classes and PriorityClasses. ``progress(done, total)`` follows the
    documents."""
    olds = dict(known.stored) if known is not None else _stored(old_entries)
    applied = [
        e.reading.obj
        for e in [*old_entries, *entries]
        if e.reading is not None and isinstance(e.reading.obj, Namespace)
    ]
    if known is not None:
        known = known.with_namespaces(applied)
    namespaces = known.labels() if known is not None else {n.name: n.metadata.labels or {} for n in applied}
    namespaces.update(given_labels)
    checked = [
        e for e in entries if e.reading is None or e.reading.skipped is None or e.reading.metadata_only
    ]
    readings = [e.reading for e in checked if e.reading is not None and e.reading.obj is not None]
    objects = [r.obj for r in readings if r.obj is not None]
    stored_classes = listed.store.snapshot().priority_classes.values() if listed is not None else ()
    priorities = Priorities.among([*stored_classes, *olds.values(), *objects])
    warned = iter(_selector_warnings(objects, [_old(olds, r) for r in readings], listed))
    again = {
        id(later): [applied_twice(later, earlier)]
        for later, earlier in duplicated(entries)
        if later.reading is not None
    }
    results = []
    for entry in checked:
        reading = entry.reading
        if reading is None:
            results.append(Result(entry.where, "", "", [entry.problem or ""], unreadable=True))
            continue
        name = _shown_name(reading.namespace, reading.name)
        result = Result(entry.where, reading.kind, name, metadata_only=reading.metadata_only)
        result.errors = list(reading.errors)
        result.warnings = list(reading.warnings)
        result.warnings += again.get(id(entry), [])
        key = identity(reading)
        namespace = key[2] if key is not None else reading.namespace
        old = _old(olds, reading)
        result.update = old is not None
        refused = known.lifecycle_refusal(reading) if known is not None else None
        labels = namespaces.get(namespace)
        judged = (
            [refused]
            if refused is not None
            else judge(reading, old, labels, allow_privileged=allow_privileged, priorities=priorities)
        )
        result.errors += [_with_flag(line, namespace) for line in judged]
        result.warnings += selector_notes(reading, judged) if old is None else []
        if reading.obj is not None:
            prefix = f"{reading.kind} {result.name}: "
            result.warnings += [w.removeprefix(prefix) for w in next(warned)]
            result.warnings += template_refusal(reading, priorities)
        results.append(result)
        if progress is not None:
            progress(len(results), len(checked))
    return results


def _old(olds: Mapping[Identity, TypedObject], reading: Reading) -> TypedObject | None:
    key = identity(reading)
    return olds.get(key) if key is not None else None


def _selector_warnings(
    objects: Sequence[TypedObject], olds: Sequence[TypedObject | None], listed: Listed | None
) -> list[list[str]]:
    """The selectors rule's warnings for each object, as audit gives them, when the input holds
    ResourceSlices to compare with, or as the webhook gives them in the ``listed`` cluster (the
    objects written over its own, each an update of its ``olds`` entry where there is one). The
    audit's code and the rule are loaded only then (only the selectors rule: the others bring in
    the scheduler's dry run); together they take several times longer to import than a small
    validate takes to run."""
    listed_devices = listed is not None and listed.counts.get("resourceslices") is not None
    if not listed_devices and not any(isinstance(o, ResourceSlice) for o in objects):
        return [[] for _ in objects]
    from policies.audit import selector_warnings
    from policies.rules.selectors import SelectorsRule

    now = datetime.now(UTC)
    cluster = None
    if listed is not None and listed_devices:
        from webhook.state import write_over

        written = [apply_defaults(o, now) for o in objects if not isinstance(o, Pod)]
        write_over(listed.store, listed.reader, written)
        cluster = listed.store.snapshot()
    return selector_warnings(objects, (SelectorsRule(),), now, cluster, olds)


def _with_flag(line: str, namespace: str) -> str:
    """A problem that only the namespace's labels would settle, with the flag that gives them."""
    if NAMESPACE_UNKNOWN not in line:
        return line
    return (
        f"{line} (give them with --namespace-labels {namespace}:{ADMIN_ACCESS_LABEL}=true, "
        "or put the Namespace in the input)"
    )


def _shown_name(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace and name else name


def _summary(results: Sequence[Result]) -> dict[str, int]:
    documents = [r for r in results if not r.unreadable]
    invalid = sum(1 for r in documents if r.errors)
    return {
        "objects": len(documents),
        "valid": len(documents) - invalid,
        "invalid": invalid,
        "problems": sum(len(r.errors) for r in documents),
        "warnings": sum(len(r.warnings) for r in documents),
        "unreadable": len(results) - len(documents),
    }


def summary(results: Sequence[Result], style: Style = PLAIN) -> str:
    """``3 objects: 2 valid, 1 invalid (1 problem)``, and the files that could not be read."""
    s = _summary(results)
    invalid = f"{s['invalid']} invalid"
    counts = [plural(s["problems"], "problem")]
    if s["warnings"]:
        counts.append(plural(s["warnings"], "warning"))
    line = f"{plural(s['objects'], 'object')}: {s['valid']} valid, "
    line += f"{style.paint(invalid, RED) if s['invalid'] else invalid} ({', '.join(counts)})"
    if s["unreadable"]:
        line += f"; {style.paint(plural(s['unreadable'], 'file'), RED)} could not be read"
    return line


def print_text(results: Sequence[Result], out: TextIO, style: Style = PLAIN) -> None:
    warning = style.paint("warning", YELLOW)
    for result in results:
        # A CEL compile error spans lines (the expression and a caret); keep them under their
        # problem. The warnings follow: some say what a problem means (for an object already stored).
        for error in result.errors:
            print(f"{result.label}: {error}".replace("\n", "\n    "), file=out)
        for message in result.warnings:
            print(f"{result.label}: {warning}: {message}".replace("\n", "\n    "), file=out)
    print(summary(results, style), file=out)


def to_json(results: Sequence[Result]) -> dict[str, Any]:
    """The ``ValidateReport`` document (:mod:`policies.outputs`)."""
    return ValidateReport(
        objects=[
            ValidatedObject(
                source=r.where,
                kind=r.kind,
                name=r.name,
                checked="metadata" if r.metadata_only else "object",
                valid=not r.errors,
                problems=r.errors,
                warnings=r.warnings,
            )
            for r in results
            if not r.unreadable
        ],
        unreadable=[r.errors[0] for r in results if r.unreadable],
        summary=ValidateSummary(**_summary(results)),
    ).to_json()
