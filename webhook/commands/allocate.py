"""``draguard allocate``: dry-run the structured allocator on manifests, node by node.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard allocate --help``).
Objects are defaulted as the API server would store them before anything is allocated.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from policies.allocator import Features, SearchBudget
from policies.api.core import Node, Pod
from policies.api.defaults import apply_defaults
from policies.dryrun import DryRun, DryRunInputError, NodeAnswer, claims_to_allocate
from policies.snapshot import Snapshot
from webhook.commands import SUMMARIES
from webhook.commands.common import TABLE_FORMATS, add_output, style
from webhook.manifests import ManifestError, load
from webhook.output import Progress, Table, dump, print_table


class InputError(Exception):
    """Input the allocation cannot start from (exit code 2)."""


DESCRIPTION = """\
Dry-run the scheduler's structured allocator on manifests, node by node: where would these claims
or this pod fit, with which devices, and why not elsewhere.

The files hold DeviceClasses, ResourceSlices, Nodes, ResourceClaims and optionally one Pod and
DeviceTaintRules. Claims that already have status.allocation are the cluster's allocated state.
The claims to allocate are the pod's (claims from its templates made as the controller would)
when a Pod is given, otherwise the claims not yet allocated, in file order.

Exit codes: 0 fits on some node, 1 fits on none, 2 the input cannot be used."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "allocate",
        help=SUMMARIES["allocate"],
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE_OR_DIR",
        help="YAML/JSON files or directories with the cluster's objects and what to allocate (repeatable)",
    )
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
    add_output(p, (*TABLE_FORMATS, "name"))
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


def _inputs(args: argparse.Namespace) -> tuple[Snapshot, list[Node], Pod | None]:
    now = datetime.now(UTC)
    try:
        snapshot = Snapshot.build(apply_defaults(x.obj, now) for x in load(args.files))
    except ManifestError as err:
        raise InputError(str(err)) from None
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


def _devices(answer: NodeAnswer) -> str:
    """The devices allocated on this node, ``DRIVER/POOL/DEVICE`` each: a pool and a device name
    are only unique within their driver."""
    devices = [
        f"{r.driver}/{r.pool}/{r.device}"
        for result in answer.results
        if result is not None and result.devices is not None
        for r in result.devices.results or []
    ]
    return ",".join(devices) or "-"


def table(answers: Sequence[NodeAnswer]) -> Table:
    rows = [(a.node, "yes" if a.allocated else "no", _devices(a), a.reason or "") for a in answers]
    return Table(("NODE", "FITS", "DEVICES", "REASON"), rows)


def run(args: argparse.Namespace) -> int:
    try:
        features = Features() if args.features is None else Features.parse(args.features)
        snapshot, nodes, pod = _inputs(args)
        claims = claims_to_allocate(snapshot, pod)
    except (InputError, DryRunInputError, ValueError) as err:
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
    with Progress("allocate") as progress:
        for node in nodes:

            def call(node: Node = node) -> NodeAnswer:
                node_start[0] = time.monotonic()
                return dry.on_node(node)

            entries.append(_timed(call, args.repeat))
            progress(len(entries), len(nodes))
    answers = [a for a, _ in entries]
    if args.output == "table":
        print_table(table(answers), sys.stdout, style(args))
    elif args.output == "name":  # the nodes it fits on, one a line, for scripts
        for answer in answers:
            if answer.allocated:
                print(answer.node)
    else:
        dump({"nodes": [_entry_json(a, t) for a, t in entries]}, args.output, sys.stdout)
    return 0 if any(a.allocated for a in answers) else 1


def _entry_json(answer: NodeAnswer, timing: dict[str, int] | None) -> dict[str, Any]:
    out = answer.to_json()
    if timing is not None:
        out["timing"] = timing
    return out
