"""``draguard audit``: what draguard would say about the objects already in a cluster, and its DRA health.

Every rule runs on every object as if it were being created now; then the cluster-level checks
run (selectors matching nothing, incomplete or stale pools, claims allocated for nodes that are
gone, pending pods whose claims fit nowhere, allocated devices tainted NoExecute). See
:mod:`policies.audit` for what each finding means.

The objects come from manifests (``-f``, e.g. ``kubectl get ... -o yaml`` dumps, read as
``draguard validate`` reads them) or are listed once from a cluster (``--kubeconfig``). Objects of
kinds draguard does not check are skipped with one note per kind (workloads too: their pod
templates are ``validate``'s and ``allocate``'s to check, they are not pods of the cluster);
objects or files it cannot read are reported as ``error`` results.

Output: a table of the findings that are not ``pass``, ``-o json`` (every result), or
``-o policyreport`` (``wgpolicyk8s.io/v1alpha2`` PolicyReports, one per namespace, and one
ClusterPolicyReport, as multi-document YAML for ``kubectl apply -f -``).

Exit codes: 0 no finding is ``fail`` or ``error``, 1 some finding is, 2 the input or the options
cannot be used (nothing could be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from policies.api.base import TypedObject
from policies.api.kinds import KINDS, DecodeError, decode, validation_problems
from policies.audit import (
    RESULTS,
    UNDECODABLE,
    Finding,
    Report,
    audit,
    left_out,
    policy_reports,
    undecodable,
    undecodable_document,
)
from policies.config import Config
from policies.dryrun import FeatureGates
from policies.rules.registry import RULES
from webhook.commands.common import (
    UsageError,
    add_reading_flags,
    print_notes,
    read_inputs,
)
from webhook.kube import ConnectError, KubeError, KubeReader, NotServed, connect
from webhook.manifests import Entry, ManifestError, read_documents
from webhook.state import RESOURCES
from webhook.tables import render

PROGRESS_WIDTH = 30
WORKLOAD_NOTE = "a workload, not a pod of the cluster (validate and allocate check its pod template)"


class InputError(Exception):
    """Input the audit cannot start from (exit code 2)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="check the objects already in a cluster against the rules, and report DRA health problems",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="extend",
        nargs="+",
        metavar="FILE_OR_DIR",
        help="manifests: YAML or JSON files, directories, or - for stdin (repeatable; several per -f)",
    )
    source.add_argument("--kubeconfig", metavar="FILE", help="list the objects from this cluster")
    p.add_argument(
        "-R", "--recursive", action="store_true", help="read the directories given with -f recursively"
    )
    add_reading_flags(p)
    p.add_argument("--config", metavar="FILE", help="draguard config file (default: the built-in defaults)")
    p.add_argument(
        "--features",
        default=None,
        metavar="LIST",
        help="Kubernetes feature gates as Name=true|false on top of the 1.36 defaults, or 'all', 'none' or "
        "a comma list of allocator switches",
    )
    p.add_argument("-o", "--output", choices=("table", "json", "policyreport"), default="table")
    p.set_defaults(func=run)


# --- input ---------------------------------------------------------------------------------------


def load_config(path: str) -> Config:
    """The draguard config in ``path``; :class:`InputError` naming the field on any problem."""
    try:
        docs = read_documents([path])
    except ManifestError as err:
        raise InputError(f"--config {err}") from None
    if len(docs) != 1:
        raise InputError(f"--config {path}: holds {len(docs)} YAML documents; a config is one")
    try:
        return Config.model_validate(docs[0].raw or {})
    except ValidationError as err:
        raise InputError("\n".join(f"--config {path}: {p}" for p in validation_problems(err))) from None


def _decode(raws: Iterable[tuple[Any, str]]) -> tuple[list[TypedObject], list[Finding], set[str]]:
    """Objects of the kinds draguard models; the ones it cannot read as findings; the kinds skipped.
    Each raw object comes with where it was read (``file: document 2``, ``pods``)."""
    objects: list[TypedObject] = []
    unreadable: list[Finding] = []
    skipped: set[str] = set()
    for raw, where in raws:
        if not isinstance(raw, dict) or (raw.get("apiVersion"), raw.get("kind")) not in KINDS:
            skipped.add(str(raw.get("kind")) if isinstance(raw, dict) else type(raw).__name__)
            continue
        try:
            objects.append(decode(raw))
        except DecodeError as err:
            unreadable.append(undecodable(raw, [f"{where}: {p}" for p in err.problems]))
    return objects, unreadable, skipped


def from_files(args: argparse.Namespace) -> tuple[list[TypedObject], list[Finding]]:
    """The objects of ``-f``, read as validate reads them; what cannot be read as findings."""
    entries = read_inputs(args)
    if not any(e.reading is not None for e in entries):
        problems = [e.problem or e.where for e in entries] or [f"no objects found in {', '.join(args.files)}"]
        raise InputError("\n".join(problems))
    for entry in entries:
        if entry.reading is not None and entry.reading.template is not None:
            entry.reading.skipped = WORKLOAD_NOTE
    print_notes(entries, sys.stderr)
    objects = [
        e.reading.obj
        for e in entries
        if e.reading is not None and e.reading.obj is not None and e.reading.skipped is None
        and not e.reading.errors
    ]
    return objects, [_unreadable(e) for e in entries if e.reading is None or e.reading.errors]


def _unreadable(entry: Entry) -> Finding:
    if entry.reading is None:
        return Finding("policy", UNDECODABLE, "error", entry.problem or entry.where, ())
    return undecodable_document(entry.reading, [f"{entry.where}: {p}" for p in entry.reading.errors])


def from_cluster(kubeconfig: str) -> list[tuple[Any, str]]:
    """Every object draguard reads, listed once (raw JSON, so fields the client's models do not
    know are kept); a resource the cluster does not serve is skipped when it is optional."""
    try:
        reader = KubeReader(connect(kubeconfig, in_cluster=False))
        raws: list[tuple[Any, str]] = []
        for resource in RESOURCES:
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
        return raws
    except (ConnectError, KubeError) as err:
        raise InputError(f"--kubeconfig {kubeconfig}: {err}") from None


# --- output --------------------------------------------------------------------------------------


class ProgressBar:
    """``audit [#####.....] 12/40`` redrawn in place on a terminal; nothing when not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        filled = PROGRESS_WIDTH * done // total
        self._stream.write(f"\raudit [{'#' * filled}{'.' * (PROGRESS_WIDTH - filled)}] {done}/{total}")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self._stream.write("\r" + " " * (PROGRESS_WIDTH + 30) + "\r")
            self._stream.flush()


def summary(report: Report) -> str:
    counts = ", ".join(f"{report.count(r)} {r}" for r in RESULTS)
    return f"audited {report.objects} objects: {counts}"


def table(report: Report) -> str:
    shown = [f for f in report.findings if f.result not in ("pass", "skip")]
    if not shown:
        return "no findings"
    rows = [("RESULT", "RULE", "RESOURCE", "MESSAGE")]
    rows += [(f.result, f.rule, str(f.resources[0]) if f.resources else "-", f.message) for f in shown]
    return render(rows)


def to_json(report: Report) -> dict[str, Any]:
    return {
        "objects": report.objects,
        "summary": {r: report.count(r) for r in RESULTS},
        "findings": [f.to_json() for f in report.findings],
    }


def run(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    try:
        features = FeatureGates() if args.features is None else FeatureGates.parse(args.features)
        config = load_config(args.config) if args.config else Config()
        if args.files:
            objects, unreadable = from_files(args)
        else:
            objects, unreadable, skipped = _decode(from_cluster(args.kubeconfig))
            if skipped:
                print(f"note: skipped objects of kinds draguard does not check: {', '.join(sorted(skipped))}",
                      file=sys.stderr)
    except (InputError, UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else None
    try:
        report = audit(objects, RULES, config, now, features, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    report = replace(report, findings=(*unreadable, *report.findings))
    if args.output == "json":
        print(json.dumps(to_json(report), indent=2))
    elif args.output == "policyreport":
        print(yaml.safe_dump_all(policy_reports(report, now), sort_keys=False), end="")
        if dropped := left_out(report):
            namespaces = ", ".join(sorted({f.namespace for f in dropped}))
            print(f"note: {len(dropped)} results in namespaces being deleted ({namespaces}) are not in the "
                  "PolicyReports: the API server creates nothing there", file=sys.stderr)
    else:
        print(table(report))
        print(summary(report))
    return 1 if report.failed or report.count("error") else 0
