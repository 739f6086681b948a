"""``draguard validate``: the API server's verdict on DRA manifests, without a cluster.

Every object is defaulted and validated as the API server would on ``kubectl apply`` (see
:mod:`policies.validation`). One line per problem, prefixed with where the object is and what it
is, so that the output reads like kubectl's and can be grepped::

    c.yaml: document 2: ResourceClaim team-a/big: spec.devices.requests[0].exactly.count: Invalid value:
    -1: must be greater than zero

(one line in the output, wrapped here).

Exit codes: 0 every object is valid, 1 any object is invalid (including objects that cannot be
decoded: wrong apiVersion, unknown kind, a string where a list belongs), 2 input that cannot be
read at all (missing file, not YAML or JSON) or bad options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from policies.api.base import TypedObject
from policies.api.core import Namespace
from policies.api.kinds import DEFAULT_NAMESPACE, NAMESPACED_KINDS, DecodeError, decode
from policies.api.resource import ADMIN_ACCESS_LABEL
from policies.validation import ErrorType, render, validate
from policies.validation.validate import NAMESPACE_UNKNOWN
from webhook.commands import SUMMARIES
from webhook.commands.common import add_output, style
from webhook.manifests import Document, ManifestError, read_documents
from webhook.output import PLAIN, RED, YELLOW, Progress, Style, dump, plural

UNKNOWN_FIELD_MODES = ("error", "warn", "ignore")


class UsageError(Exception):
    """An option value that cannot be used (exit code 2)."""


@dataclass
class Result:
    """What was found about one document."""

    where: str
    kind: str
    name: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.where}: {self.kind or '<no kind>'} {self.name or '<no name>'}"


DESCRIPTION = """\
Validate manifests offline with the API server's rules for resource.k8s.io objects and the DRA
parts of pods: each object is defaulted and checked as 'kubectl apply' would have it checked.
One line per problem, with the file, the document, the object and the field:

  claims.yaml: document 2: ResourceClaim team-a/big: spec.devices.requests[0].exactly.count:
  Invalid value: -1: must be greater than zero

Exit codes: 0 every object is valid, 1 some object is invalid, 2 the input cannot be read."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help=SUMMARIES["validate"],
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="extend",
        nargs="+",
        required=True,
        metavar="FILE_OR_DIR",
        help="YAML/JSON files or directories (repeatable)",
    )
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
    parser.add_argument(
        "--unknown-fields",
        choices=UNKNOWN_FIELD_MODES,
        default="error",
        help="fields the API does not define: an error (as kubectl's strict validation), "
        "a warning, or ignored (default: error)",
    )
    add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        labels = parse_namespace_labels(args.namespace_labels)
        docs = read_documents(args.files)
        old_docs = read_documents(args.old)
    except (ManifestError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not docs:
        print(f"error: no objects found in {', '.join(args.files)}", file=sys.stderr)
        return 2
    with Progress("validate") as progress:
        results = check(docs, old_docs, labels, args.unknown_fields, progress)
    if args.output == "table":
        print_text(results, sys.stdout, style(args))
    else:
        dump(to_json(results), args.output, sys.stdout)
    return 1 if any(r.errors for r in results) else 0


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


def _identity(obj: TypedObject) -> tuple[str, str, str]:
    namespace = (obj.namespace or DEFAULT_NAMESPACE) if obj.kind in NAMESPACED_KINDS else ""
    return (obj.kind or "", namespace, obj.name)


def _decode_quietly(docs: Sequence[Document]) -> list[TypedObject]:
    objects = []
    for doc in docs:
        try:
            objects.append(decode(doc.raw))
        except DecodeError:
            continue
    return objects


def check(
    docs: Sequence[Document],
    old_docs: Sequence[Document],
    given_labels: Mapping[str, dict[str, str]],
    unknown_fields: str,
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """Validate every document; objects in --old files only serve as the stored versions, unchecked.
    ``progress(done, total)`` is called after each document."""
    olds = {_identity(o): o for o in _decode_quietly(old_docs)}
    namespaces = {
        o.name: o.metadata.labels or {}
        for o in _decode_quietly([*old_docs, *docs])
        if isinstance(o, Namespace)
    }
    namespaces.update(given_labels)
    results = []
    for doc in docs:
        results.append(_check_one(doc, olds, namespaces, unknown_fields))
        if progress is not None:
            progress(len(results), len(docs))
    return results


def _raw_identity(raw: Any) -> tuple[str, str]:
    """Kind and name of a document that may not decode, for the line prefix."""
    if not isinstance(raw, Mapping):
        return "", ""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    namespace = meta.get("namespace")
    return str(raw.get("kind") or ""), f"{namespace}/{name}" if namespace and name else name


def _check_one(
    doc: Document,
    olds: Mapping[tuple[str, str, str], TypedObject],
    namespaces: Mapping[str, Mapping[str, str]],
    unknown_fields: str,
) -> Result:
    kind, name = _raw_identity(doc.raw)
    result = Result(str(doc.source), kind, name)
    try:
        obj = decode(doc.raw)
    except DecodeError as err:
        result.errors = list(err.problems)
        return result
    result.name = obj.key or name
    identity = _identity(obj)
    try:
        errors = validate(obj, olds.get(identity), namespace_labels=namespaces.get(identity[1]))
    except Exception as err:  # a bug in draguard: say so on this object, keep checking the others
        result.errors = [f"<root>: Internal error: draguard could not validate this object: {err!r}"]
        return result
    unknown = [e for e in errors if e.type is ErrorType.UNKNOWN_FIELD]
    result.errors = [
        _with_flag(line, identity[1])
        for line in render(e for e in errors if e.type is not ErrorType.UNKNOWN_FIELD)
    ]
    if unknown_fields == "error" and unknown:
        # Strict field validation (kubectl's default) fails the request while decoding it: the
        # API server never gets to validate such an object, so only the unknown fields are said.
        result.errors = render(unknown)
    elif unknown_fields == "warn":
        result.warnings = render(unknown)
    return result


def _with_flag(line: str, namespace: str) -> str:
    """A problem that only the namespace's labels would settle, with the flag that gives them."""
    if NAMESPACE_UNKNOWN not in line:
        return line
    return (
        f"{line} (give them with --namespace-labels {namespace}:{ADMIN_ACCESS_LABEL}=true, "
        "or put the Namespace in the input)"
    )


def _summary(results: Sequence[Result]) -> dict[str, int]:
    invalid = sum(1 for r in results if r.errors)
    return {
        "objects": len(results),
        "valid": len(results) - invalid,
        "invalid": invalid,
        "problems": sum(len(r.errors) for r in results),
        "warnings": sum(len(r.warnings) for r in results),
    }


def summary(results: Sequence[Result], style: Style = PLAIN) -> str:
    """``3 objects: 2 valid, 1 invalid (1 problem)``."""
    s = _summary(results)
    invalid = style.paint(f"{s['invalid']} invalid", RED) if s["invalid"] else f"{s['invalid']} invalid"
    counts = [plural(s["problems"], "problem")]
    if s["warnings"]:
        counts.append(plural(s["warnings"], "warning"))
    return f"{plural(s['objects'], 'object')}: {s['valid']} valid, {invalid} ({', '.join(counts)})"


def print_text(results: Sequence[Result], out: TextIO, style: Style = PLAIN) -> None:
    warning = style.paint("warning", YELLOW)
    for result in results:
        for message in result.warnings:
            print(f"{result.label}: {warning}: {message}", file=out)
        for error in result.errors:
            # A CEL compile error spans lines (the expression and a caret); keep them under their problem.
            print(f"{result.label}: {error}".replace("\n", "\n    "), file=out)
    print(summary(results, style), file=out)


def to_json(results: Sequence[Result]) -> dict[str, Any]:
    return {
        "objects": [
            {
                "source": r.where,
                "kind": r.kind,
                "name": r.name,
                "valid": not r.errors,
                "problems": r.errors,
                "warnings": r.warnings,
            }
            for r in results
        ],
        "summary": _summary(results),
    }
