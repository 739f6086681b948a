"""``draguard audit``: what draguard would say about the objects already in a cluster, and its DRA health.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard audit --help``); what each
finding means is in :mod:`policies.audit`. Manifests are read as ``draguard validate`` reads them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from policies.api.base import TypedObject
from policies.api.kinds import KINDS, DecodeError, decode
from policies.audit import (
    RESULTS,
    UNDECODABLE,
    Finding,
    Report,
    audit,
    invalid_document,
    invalid_object,
    left_out,
    policy_reports,
    undecodable,
    undecodable_document,
)
from policies.config import Config
from policies.dryrun import FeatureGates
from policies.outputs import AuditFinding, AuditReport, AuditSummary
from policies.priority import Priorities
from policies.reading import Reading
from policies.rules.registry import RULES
from policies.validation.documents import admission_refusals, judge_existing
from webhook.commands import add_command
from webhook.commands.common import (
    TABLE_FORMATS,
    UsageError,
    add_cluster,
    add_file_flags,
    add_output,
    add_reading_flags,
    print_notes,
    read_inputs,
    style,
)
from webhook.configfile import ConfigFileError, read_config
from webhook.manifests import Entry, latest, priority_classes
from webhook.output import PLAIN, Progress, Style, Table, dump, dump_all, plural, print_table

if TYPE_CHECKING:
    from webhook.kube import ApiResource

DESCRIPTION = """\
What draguard would say about the objects already in a cluster, and the cluster's DRA health.

Every rule runs on every object as if it were being created now; then the cluster-wide checks
run: selectors that match no device, incomplete or stale pools, claims allocated on nodes that
are gone, pending pods whose claims fit nowhere, allocated devices with a NoExecute taint.

The objects are listed once from the cluster of the kubeconfig (--kubeconfig, else $KUBECONFIG,
else ~/.kube/config; --context to choose a context), or read from manifests with -f (for example
'kubectl get ... -o yaml' dumps), as 'draguard validate' reads them. Objects of kinds draguard
does not check are skipped but for their metadata, with one note per kind (workloads too: their
pod templates are for validate and allocate to check, they are not pods of the cluster); objects
or files it cannot read are 'error' results. The objects are a cluster as it stands: of two
documents naming the same object the later one wins (a note says so), and what the API server's
validation says of an object (as validate says it) is an 'invalid-objects' warning, the object
audited all the same. A pod the API server's Priority admission plugin would refuse (a
priorityClassName no PriorityClass of the input has) is in no cluster: an 'error' result, not
audited.

Output: a table of the results that are not 'pass'; -o json or -o yaml (every result); or
-o policyreport: wgpolicyk8s.io/v1alpha2 PolicyReports (one per namespace) and a
ClusterPolicyReport, as YAML for 'kubectl apply -f -'.

Exit codes: 0 no result is 'fail' or 'error', 1 some result is, 2 the input, the config or the
cluster cannot be used (nothing could be read)."""
WORKLOAD_NOTE = "a workload, not a pod of the cluster (validate and allocate check its pod template)"


class InputError(Exception):
    """Input the audit cannot start from (exit code 2)."""


def register(sub: Any) -> None:
    p = add_command(sub, "audit", DESCRIPTION)
    add_file_flags(p, required=False)
    add_cluster(p, "audit when no -f is given")
    add_reading_flags(p)
    p.add_argument("--config", metavar="FILE", help="draguard config file (default: the built-in defaults)")
    p.add_argument(
        "--features",
        default=None,
        metavar="LIST",
        help="Kubernetes feature gates as Name=true|false on top of the 1.36 defaults, or 'all', 'none' or "
        "a comma list of allocator switches",
    )
    add_output(p, (*TABLE_FORMATS, "policyreport"))
    p.set_defaults(func=run)


# --- input ---------------------------------------------------------------------------------------


def load_config(path: str | None) -> Config:
    """The draguard config in ``path`` (the file ``serve`` takes); :class:`InputError` naming each
    field on any problem."""
    try:
        return read_config(path)
    except ConfigFileError as err:
        raise InputError(str(err)) from None


def _decode(raws: Iterable[tuple[Any, str]]) -> tuple[list[TypedObject], list[Finding], set[str]]:
    """Objects of the kinds draguard models; the ones it cannot read as findings; the kinds skipped.
    Each raw object comes with where it was read (``file: document 2``, ``pods``)."""
    objects: list[TypedObject] = []
    unreadable: list[Finding] = []
    skipped: set[str] = set()
    for raw, where in raws:
        # Only an object that names a kind draguard does not check is skipped; anything else is
        # decoded, and what cannot be is said so by decode().
        kind = raw.get("kind") if isinstance(raw, dict) else None
        if isinstance(kind, str) and kind and (raw.get("apiVersion"), kind) not in KINDS:
            skipped.add(kind)
            continue
        try:
            objects.append(decode(raw))
        except DecodeError as err:
            unreadable.append(undecodable(raw, [f"{where}: {p}" for p in err.problems]))
    return objects, unreadable, skipped


def from_files(args: argparse.Namespace) -> tuple[list[TypedObject], list[Finding]]:
    """The objects of ``-f``, read as validate reads them, as a cluster holds them: the later of two
    documents naming the same object wins; what cannot be read is an error finding, what the API
    server's validation says of an object a warning finding (the object is audited all the same)."""
    entries, notes = latest(read_inputs(args))
    if not any(e.reading is not None for e in entries):
        problems = [e.problem or e.where for e in entries] or [f"no objects found in {', '.join(args.files)}"]
        raise InputError("\n".join(problems))
    for entry in entries:
        if entry.reading is not None and entry.reading.template is not None:
            entry.reading.skipped = WORKLOAD_NOTE
    print_notes(entries, sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    objects: list[TypedObject] = []
    findings = [_unreadable(e) for e in entries if e.reading is None or e.reading.errors]
    priorities = priority_classes(entries)
    for entry in entries:
        reading = entry.reading
        if reading is None or reading.errors:
            continue
        # A pod the Priority admission plugin refuses is in no cluster: an error, worded as validate
        # words it, and not audited.
        refused = admission_refusals(reading, priorities)
        if refused:
            findings.append(invalid_document(reading, [f"{entry.where}: {p}" for p in refused]))
            continue
        warned = judge_existing(reading, allow_privileged=args.allow_privileged, priorities=priorities)
        if warned:
            findings.append(invalid_object(reading, [f"{entry.where}: {w}" for w in warned]))
        if reading.obj is not None and reading.skipped is None:
            objects.append(reading.obj)
    return objects, findings


def from_objects(objects: Sequence[TypedObject], allow_privileged: bool) -> list[Finding]:
    """What the API server's validation says of the objects listed from a cluster: warnings."""
    findings = []
    priorities = Priorities.among(objects)
    for obj in objects:
        reading = Reading(obj.api_version or "", obj.kind or "", obj.name, obj.namespace, obj=obj)
        warned = judge_existing(reading, allow_privileged=allow_privileged, priorities=priorities)
        if warned:
            findings.append(invalid_object(reading, warned))
    return findings


def _unreadable(entry: Entry) -> Finding:
    if entry.reading is None:
        return Finding("policy", UNDECODABLE, "error", entry.problem or entry.where, ())
    return undecodable_document(entry.reading, [f"{entry.where}: {p}" for p in entry.reading.errors])


def from_cluster(
    kubeconfig: str | None, context: str | None, resources: Sequence[ApiResource] | None = None
) -> list[tuple[Any, str]]:
    """Every object draguard reads (or those of ``resources``), listed once (raw JSON, so fields
    the client's models do not know are kept); a resource the cluster does not serve is skipped
    when it is optional."""
    # The Kubernetes client is imported only when a cluster is audited (it takes longer to import
    # than the audit of a small file takes to run).
    from webhook.kube import ConnectError, KubeError, KubeReader, NotServed, connect
    from webhook.state import RESOURCES

    try:
        reader = KubeReader(connect(kubeconfig, in_cluster=False, context=context))
    except ConnectError as err:
        raise InputError(str(err)) from None
    raws: list[tuple[Any, str]] = []
    try:
        for resource in RESOURCES if resources is None else resources:
            try:
                for items, _ in reader.list_pages(resource):
                    # List items carry no apiVersion/kind: the list's resource says what they are.
                    raws += [
                        ({**item, "apiVersion": resource.api_version, "kind": resource.kind}, str(resource))
                        for item in items
                    ]
            except NotServed:
                if not resource.optional:
                    raise
    except KubeError as err:
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else "the cluster"
        raise InputError(f"{where}: {err}") from None
    return raws


# --- output --------------------------------------------------------------------------------------


def summary(report: Report, style: Style = PLAIN) -> str:
    counts = ", ".join(f"{report.count(r)} {style.status(r)}" for r in RESULTS)
    return f"audited {plural(report.objects, 'object')}: {counts}"


def table(report: Report) -> Table | None:
    """The results that are not ``pass`` or ``skip``, one a row; None when there are none."""
    shown = [f for f in report.findings if f.result not in ("pass", "skip")]
    if not shown:
        return None
    rows = [(f.result, f.rule, str(f.resources[0]) if f.resources else "-", f.message) for f in shown]
    return Table(("RESULT", "RULE", "RESOURCE", "MESSAGE"), rows)


def to_json(report: Report) -> dict[str, Any]:
    """The ``AuditReport`` document (:mod:`policies.outputs`)."""
    return AuditReport(
        objects=report.objects,
        summary=AuditSummary.model_validate({r: report.count(r) for r in RESULTS}),
        findings=[AuditFinding.model_validate(f.to_json()) for f in report.findings],
    ).to_json()


def run(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    try:
        if args.files and (args.kubeconfig or args.context):
            raise InputError("give -f (manifests) or a cluster (--kubeconfig, --context), not both")
        features = FeatureGates() if args.features is None else FeatureGates.parse(args.features)
        config = load_config(args.config)
        if args.files:
            objects, read = from_files(args)
        else:
            objects, read, skipped = _decode(from_cluster(args.kubeconfig, args.context))
            read += from_objects(objects, args.allow_privileged)
            if skipped:
                kinds = ", ".join(sorted(skipped))
                print(f"note: skipped objects of kinds draguard does not check: {kinds}", file=sys.stderr)
    except (InputError, UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with Progress("audit") as progress:
        unread = [ref for finding in read if finding.rule == UNDECODABLE for ref in finding.resources]
        report = audit(objects, RULES, config, now, features, progress=progress, unread=unread)
    report = replace(report, findings=(*read, *report.findings))
    if args.output == "policyreport":
        dump_all(policy_reports(report, now), sys.stdout)
        if dropped := left_out(report):
            namespaces = ", ".join(sorted({f.namespace for f in dropped}))
            print(
                f"note: {len(dropped)} results in namespaces being deleted ({namespaces}) are not in the "
                "PolicyReports: the API server creates nothing there",
                file=sys.stderr,
            )
    elif args.output != "table":
        dump(to_json(report), args.output, sys.stdout)
    else:
        painted = style(args)
        found = table(report)
        if found is None:
            print("no findings")
        else:
            print_table(found, sys.stdout, painted)
        print(summary(report, painted))
    return 1 if report.failed or report.count("error") else 0
