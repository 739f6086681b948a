"""``draguard allocate``: dry-run the structured allocator on manifests, node by node.

The files hold DeviceClasses, ResourceSlices, Nodes, ResourceClaims and optionally one Pod (or
one workload, such as a Deployment or a Job, of which one pod of its template is allocated) and
DeviceTaintRules. Claims that already have ``status.allocation`` are the cluster's allocated state.
The claims to allocate are the pod's (templates instantiated) when a Pod is given, otherwise the
unallocated claims in file order. Objects are defaulted as the API server would store them.

The input is read and validated as ``draguard validate`` reads and validates it first: anything
it refuses is printed as it prints it, and the exit code is 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import yaml

from policies.allocator import Features, SearchBudget
from policies.api.core import Node, Pod
from policies.api.defaults import apply_defaults
from policies.dryrun import DryRun, DryRunInputError, NodeAnswer, claims_to_allocate
from policies.snapshot import Snapshot
from policies.validation.documents import ANY_NAMESPACE, judge
from webhook.commands.common import UsageError, add_file_flags, add_reading_flags, print_notes, read_inputs
from webhook.manifests import Entry


class InputError(Exception):
    """Input the allocation cannot start from (exit code 2)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "allocate",
        help="would these claims or this pod fit: per node, with which devices, and why not",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file_flags(p)
    add_reading_flags(p)
    p.add_argument(
        "--node",
        dest="nodes",
        action="append",
        default=[],
        metavar="NAME",
        help="try only this node (repeatable); default: every Node in the input",
    )
    p.add_argument(
        "--features",
        default=None,
        metavar="LIST",
        help="'all', 'none' or a comma list of allocator features; default: the Kubernetes 1.36 defaults",
    )
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p.add_argument(
        "--repeat",
        type=int,
        default=0,
        metavar="N",
        help="allocate N more times per node on the warm allocator and report timing",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=SearchBudget().max_invocations,
        metavar="N",
        help="give up a node after N search steps (default %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up a node after this long, like the scheduler's filter timeout (default 10)",
    )
    p.set_defaults(func=run)


# The cluster's inventory, as drivers and admins published it: read strictly, not re-validated
# (what a cluster holds was admitted by its own API server).
_INVENTORY = ("ResourceSlice", "Node", "DeviceTaintRule")


def _read(args: argparse.Namespace) -> list[Entry]:
    """The input, what is to be allocated validated as ``draguard validate`` validates it (admin
    access aside: whether a namespace may use it is the cluster's to say, and this input need not
    describe namespaces); :class:`InputError` with validate's lines on any problem."""
    entries = read_inputs(args)
    print_notes(entries, sys.stderr)
    problems = []
    for entry in entries:
        if entry.reading is None:
            problems.append(entry.problem or entry.where)
            continue
        found = entry.reading.errors
        if not found and entry.reading.kind not in _INVENTORY:
            privileged = args.allow_privileged
            found = judge(entry.reading, namespace_labels=ANY_NAMESPACE, allow_privileged=privileged)
        problems += [f"{entry.label}: {line}" for line in found]
    if problems:
        raise InputError("invalid input (draguard validate says why):\n" + "\n".join(problems))
    if not any(e.reading is not None and e.reading.skipped is None for e in entries):
        raise InputError(f"no objects found in {', '.join(args.files)}")
    for entry in entries:
        reading = entry.reading
        if reading is not None and reading.template is not None:
            print(
                f"note: {entry.where}: {reading.label}: allocating one pod of its template "
                f"({'.'.join(reading.template)})",
                file=sys.stderr,
            )
    return entries


def _inputs(args: argparse.Namespace) -> tuple[Snapshot, list[Node], Pod | None]:
    now = datetime.now(UTC)
    entries = _read(args)
    objects = (e.reading.obj for e in entries if e.reading is not None and e.reading.obj is not None)
    snapshot = Snapshot.build(apply_defaults(obj, now) for obj in objects)
    pods = list(snapshot.pods.values())
    if len(pods) > 1:
        raise InputError(
            f"the input has {len(pods)} pods ({', '.join(p.key for p in pods)}): give at most one"
        )
    if args.nodes:
        unknown = [n for n in args.nodes if n not in snapshot.nodes]
        if unknown:
            known = ", ".join(snapshot.nodes) or "none"
            raise InputError(f"--node {', '.join(unknown)}: no such Node in the input (nodes: {known})")
        nodes = [snapshot.nodes[n] for n in args.nodes]
    else:
        nodes = list(snapshot.nodes.values())
    if not nodes:
        raise InputError("the input has no Node objects: add Node manifests (name and labels) to allocate on")
    return snapshot, nodes, pods[0] if pods else None


def _timed(call: Callable[[], NodeAnswer], repeat: int) -> tuple[NodeAnswer, dict[str, int] | None]:
    start = time.perf_counter_ns()
    answer = call()
    first = time.perf_counter_ns() - start
    if repeat <= 0:
        return answer, None
    runs = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        call()
        runs.append(time.perf_counter_ns() - start)
    return answer, {"firstNs": first, "medianNs": int(statistics.median(runs))}


def _table(entries: list[tuple[NodeAnswer, dict[str, int] | None]]) -> str:
    rows = [("NODE", "FITS", "DEVICES", "REASON")]
    for answer, _ in entries:
        devices = [
            f"{r.pool}/{r.device}"
            for result in answer.results
            if result is not None and result.devices is not None
            for r in result.devices.results or []
        ]
        rows.append(
            (answer.node, "yes" if answer.allocated else "no", ",".join(devices) or "-", answer.reason or "")
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ).rstrip()


def run(args: argparse.Namespace) -> int:
    try:
        features = Features() if args.features is None else Features.parse(args.features)
        snapshot, nodes, pod = _inputs(args)
        claims = claims_to_allocate(snapshot, pod)
    except (InputError, UsageError, DryRunInputError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # The timeout applies per node (as the scheduler's filter timeout does): the clock the budget
    # reads restarts at every node.
    node_start = [time.monotonic()]
    budget = SearchBudget(
        max_invocations=args.max_steps,
        deadline=args.timeout,
        clock=lambda: time.monotonic() - node_start[0],
    )
    dry = DryRun(snapshot, claims, features, pod=pod, budget=budget)
    entries = []
    for node in nodes:

        def call(node: Node = node) -> NodeAnswer:
            node_start[0] = time.monotonic()
            return dry.on_node(node)

        entries.append(_timed(call, args.repeat))
    document = {"nodes": [_entry_json(a, t) for a, t in entries]}
    if args.output == "json":
        print(json.dumps(document, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(document, sort_keys=False), end="")
    else:
        print(_table(entries))
    return 0 if any(a.allocated for a, _ in entries) else 1


def _entry_json(answer: NodeAnswer, timing: dict[str, int] | None) -> dict[str, Any]:
    out = answer.to_json()
    if timing is not None:
        out["timing"] = timing
    return out
