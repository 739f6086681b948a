"""``draguard headroom``: how many more copies of a pod fit, where they would go, what stops the next.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard headroom --help``); the
placing is :mod:`policies.dryrun.headroom`, the answer's shape :mod:`policies.dryrun.headroom_answer`.
The input is read and validated as ``draguard allocate`` reads it.
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any, TextIO

from policies.allocator import SearchBudget
from policies.api.core import Pod
from policies.dryrun import FeatureGates, Prepared, with_uid
from policies.dryrun.headroom import headroom
from policies.dryrun.headroom_answer import HeadroomAnswer, document
from policies.snapshot import Snapshot
from webhook.commands import add_command
from webhook.commands.allocate import (
    InputError,
    NodeClock,
    add_search_flags,
    check_search_numbers,
    stored_snapshot,
)
from webhook.commands.common import (
    TABLE_FORMATS,
    UsageError,
    add_file_flags,
    add_output,
    add_reading_flags,
    style,
)
from webhook.output import PLAIN, Progress, Style, Table, dump, plural, print_table

DESCRIPTION = """\
How many more copies of a pod fit, where they would go, and what stops the next one.

Copies of the pod (--pod NAMESPACE/NAME: a pending Pod of the input, or a workload whose template
is its pod) are placed one after another as consecutive scheduling cycles of kube-scheduler 1.36's
default profile would place them, each on its best-scored node (the first of equals in node
order, as 'allocate --sequence'), each seeing the devices, resources and ports the previous ones
took, until one fits nowhere, the namespace's ResourceQuotas refuse it (with the DRA footprint
draguard's quota rule folds in), or --max copies are placed. The answer: how many, per node and
per zone, and the limit for the next copy in the scheduler's words with the DRA detail (free
devices of each class the pod asks for, counters exhausted, capacity left).

The files hold the cluster as for 'draguard allocate' (Nodes, DeviceClasses, ResourceSlices,
ResourceClaims, templates, DeviceTaintRules, Namespaces, ResourceQuotas, PriorityClasses, running
Pods) and the pod; 'kubectl get nodes,deviceclasses,resourceslices,resourceclaims,
resourceclaimtemplates,resourcequotas,priorityclasses,pods -A -o yaml' prints a cluster's.

Exit codes: 0 at least one copy fits, 1 none does, 2 unusable input."""


def register(sub: Any) -> None:
    p = add_command(sub, "headroom", DESCRIPTION)
    add_file_flags(p)
    add_reading_flags(p)
    p.add_argument(
        "--pod",
        metavar="NAMESPACE/NAME",
        help="the pending pod (or workload) whose copies to place; may be left out when the input has one",
    )
    p.add_argument(
        "--max", type=int, metavar="N", help="stop after N copies (default: until one does not fit)"
    )
    add_search_flags(p)
    add_output(p, TABLE_FORMATS)
    # Files only: no cluster to take a default namespace from, so none given (allocate's -n).
    p.set_defaults(func=run, namespace=None)


def _check_numbers(args: argparse.Namespace) -> None:
    if args.max is not None and args.max < 1:
        raise UsageError(f"--max must be at least 1, got {args.max}")
    check_search_numbers(args)


def pending_pod(snapshot: Snapshot, wanted: str | None) -> Pod:
    """The pod asked for; without --pod, the input's only pending pod."""
    pending = {p.key: p for p in snapshot.pending.values()}
    listed = ", ".join(pending) or "none"
    if wanted is None:
        if len(pending) != 1:
            raise InputError(f"--pod: give the pending pod whose copies to place (pending: {listed})")
        (pod,) = pending.values()
        return with_uid(pod)
    if wanted not in pending:
        raise InputError(f"--pod {wanted}: no such pending pod in the input (pending: {listed})")
    return with_uid(pending[wanted])


def run(args: argparse.Namespace) -> int:
    try:
        _check_numbers(args)
        gates = FeatureGates() if args.features is None else FeatureGates.parse(args.features)
        snapshot, _ = stored_snapshot(args, "placing copies of its template's pod")
        if not snapshot.nodes:
            raise InputError("the input has no Node objects: add the cluster's (see --help)")
        pod = pending_pod(snapshot, args.pod)
    except (InputError, UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    clock = NodeClock()
    budget = SearchBudget(max_invocations=args.max_steps, deadline=args.timeout, clock=clock.elapsed)
    # The placements make tens of thousands of objects and no cyclic garbage: collections would
    # only walk the loaded cluster again and again (a quarter of the time on 5,000 nodes).
    gc.disable()
    try:
        with Progress("headroom") as progress:
            found = headroom(
                Prepared.of(snapshot, gates),
                pod,
                limit=args.max,
                budget=budget,
                pace=clock,
                progress=progress,
            )
    finally:
        gc.enable()
    answer = document(found, args.max, gates.changed())
    if args.output == "table":
        print_answer(answer, sys.stdout, style(args))
    else:
        dump(answer.to_json(), args.output, sys.stdout)
    return 0 if answer.copies else 1


# --- the table -------------------------------------------------------------------------------------


def node_table(answer: HeadroomAnswer) -> Table:
    return Table(("NODE", "ZONE", "COPIES"), [(n.node, n.zone or "-", str(n.copies)) for n in answer.nodes])


def headline(answer: HeadroomAnswer) -> str:
    zones = len([z for z in answer.zones if z.zone])
    where = f" on {plural(len(answer.nodes), 'node')}" if answer.nodes else ""
    where += f" in {plural(zones, 'zone')}" if zones else ""
    return f"POD {answer.pod}: {plural(answer.copies, 'more copy', 'more copies')} fit{where}"


def limit_lines(answer: HeadroomAnswer) -> list[str]:
    """The limit for the next copy, its DRA detail and the quota that refuses it."""
    limit = answer.limit
    lines = [f"NEXT COPY ({limit.by}): {limit.message}"]
    if limit.nominated:
        lines.append(
            f"  preemption: nominates {limit.nominated}, evicting {', '.join(limit.victims) or 'no pod'}"
        )
    lines += [f"  {line}" for line in limit.detail]
    if limit.quota is not None:
        used = ", ".join(f"{k} {limit.quota.used[k]}/{v}" for k, v in limit.quota.hard.items())
        lines.append(f"  quota {limit.quota.name}: {used} (used/hard, after the copies)")
    return lines


def print_answer(answer: HeadroomAnswer, out: TextIO, painted: Style = PLAIN) -> None:
    print(headline(answer), file=out)
    if answer.nodes:
        print_table(node_table(answer), out, painted)
    print("\n".join(limit_lines(answer)), file=out)
    notes = [f"feature gates: {', '.join(answer.features)}"] if answer.features else []
    notes += answer.not_checked
    if notes:
        print("\n".join(f"note: {n}" for n in notes), file=out)
