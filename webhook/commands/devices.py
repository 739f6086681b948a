"""``draguard devices``: what is free where, per pool (and its node) and per DeviceClass.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard devices --help``); what
each count means is in :mod:`policies.availability.pools`. Manifests are read as ``serve --state``
reads them (a cluster's stored objects, big JSON dumps item by item); a cluster is listed once.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from policies.api.kinds import DecodeError
from policies.availability import Tally
from policies.availability.answer import (
    DeviceAvailability,
    DeviceClassAvailability,
    DeviceCounts,
    Filters,
    Pool,
    document,
)
from policies.snapshot import Snapshot
from policies.store import Store
from policies.stored import Reader
from webhook.commands import add_command
from webhook.commands.common import (
    UsageError,
    add_cluster,
    add_file_flags,
    add_output,
    add_reading_flags,
    read_options,
    style,
)
from webhook.manifests import ManifestError
from webhook.output import PLAIN, Progress, Style, Table, dump, plural, print_table

DESCRIPTION = """\
What is free where: for every resource pool (and the node it belongs to) the devices in total,
allocated to claims, free, and tainted NoSchedule or NoExecute (by the device itself or a
DeviceTaintRule); for partitionable devices the shared counters used and left, for devices with
consumable capacity the capacity used and how many shares hold it; then the same counts per
DeviceClass over the devices its selectors admit, in total and per zone.

The counts are those of Kubernetes' ResourcePoolStatusRequest (KEP-5677, alpha and off by default
in 1.36), with its field names in -o json|yaml: totalDevices = allocatedDevices + availableDevices
+ unavailableDevices (unavailable: not allocated, tainted); a pool whose newest generation misses
slices is incomplete, with no counts. Only the newest generation of a pool counts.

The objects are read from manifests with -f (a cluster's as 'kubectl get deviceclasses,
resourceslices,resourceclaims,nodes -A -o yaml' prints them; DeviceTaintRules too where the
cluster serves them), or listed from the cluster of the kubeconfig (--kubeconfig, else
$KUBECONFIG, else ~/.kube/config; --context to choose a context).

Exit codes: 0 listed, 2 unusable input."""

# Everything the counts read; pods are not needed (a claim says which devices it holds).
KINDS_READ = ("DeviceClass", "ResourceSlice", "ResourceClaim", "Node", "DeviceTaintRule")


class InputError(Exception):
    """Input the command cannot start from (exit code 2)."""


def register(sub: Any) -> None:
    p = add_command(sub, "devices", DESCRIPTION)
    add_file_flags(p, required=False)
    add_reading_flags(p)
    add_cluster(p, "list")
    p.add_argument("--driver", metavar="NAME", help="only the pools of this DRA driver")
    p.add_argument("--pool", metavar="NAME", help="only the pools of this name")
    p.add_argument("--node", metavar="NAME", help="only the pools of this node")
    p.add_argument(
        "--class",
        dest="device_class",
        metavar="NAME",
        help="only this DeviceClass, and the pools with devices it admits",
    )
    add_output(p, ("table", "wide", "json", "yaml"))
    p.set_defaults(func=run)


def _from_files(args: argparse.Namespace) -> Snapshot:
    # Imported here: the state module brings the list/watch machinery, which -f does not use.
    from webhook.state import read_state

    try:
        store, _ = read_state(args.files, datetime.now(UTC), lambda _: False, read_options(args))
    except ManifestError as err:
        raise InputError(str(err)) from None
    return store.snapshot()


def _from_cluster(kubeconfig: str | None, context: str | None) -> Snapshot:
    """The kinds the counts read, listed once from the cluster."""
    from webhook.commands.audit import InputError as ClusterError
    from webhook.commands.audit import from_cluster
    from webhook.state import RESOURCES

    resources = [r for r in RESOURCES if r.kind in KINDS_READ]
    try:
        raws = from_cluster(kubeconfig, context, resources)
    except ClusterError as err:
        raise InputError(str(err)) from None
    store, reader = Store(), Reader()
    for raw, where in raws:
        try:
            store.put(reader.object(raw))
        except DecodeError as err:
            print(f"note: {where}: {raw['kind']} left out, it cannot be read: {err}", file=sys.stderr)
    return store.snapshot()


def _snapshot(args: argparse.Namespace) -> Snapshot:
    if args.files and (args.kubeconfig or args.context):
        raise InputError("give -f (manifests) or a cluster (--kubeconfig, --context), not both")
    return _from_files(args) if args.files else _from_cluster(args.kubeconfig, args.context)


def _check_filters(args: argparse.Namespace, snapshot: Snapshot) -> Filters:
    """The filters; a node or class that does not exist is an error naming the ones that do."""
    if (
        args.node
        and args.node not in snapshot.nodes
        and not any(s.spec.node_name == args.node for s in snapshot.slices)
    ):
        raise InputError(f"--node {args.node}: no such Node, and no ResourceSlice names it")
    if args.device_class and args.device_class not in snapshot.classes:
        known = ", ".join(sorted(snapshot.classes)) or "none"
        raise InputError(f"--class {args.device_class}: no such DeviceClass (classes: {known})")
    return Filters(args.driver, args.pool, args.node, args.device_class)


def run(args: argparse.Namespace) -> int:
    try:
        snapshot = _snapshot(args)
        filters = _check_filters(args, snapshot)
    except (InputError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with Progress("devices") as progress:
        found = document(Tally().of(snapshot, progress), filters)
    if args.output in ("json", "yaml"):
        dump(found.to_json(), args.output, sys.stdout)
    else:
        print_tables(found, sys.stdout, args.output == "wide", style(args))
    return 0


# --- the tables ------------------------------------------------------------------------------------


def _tainted(counts: DeviceCounts) -> str:
    tainted = counts.tainted_devices
    parts = [
        f"{n} {effect}"
        for n, effect in ((tainted.no_schedule, "NoSchedule"), (tainted.no_execute, "NoExecute"))
        if n
    ]
    return ", ".join(parts) or "-"


def _counts(counts: DeviceCounts | None) -> tuple[str, str, str, str]:
    if counts is None:
        return ("-", "-", "-", "-")
    return (
        str(counts.total_devices),
        str(counts.allocated_devices),
        str(counts.available_devices),
        _tainted(counts),
    )


def _counters(pool: Pool) -> str:
    """``set: counter consumed/capacity, ...`` per counter set."""
    return (
        "; ".join(
            f"{s.name}: " + ", ".join(f"{n} {c.consumed}/{c.capacity}" for n, c in s.counters.items())
            for s in pool.counter_sets
        )
        or "-"
    )


def _shared(pool: Pool) -> str:
    """Shares and capacity consumed/total of the shareable devices."""
    summary = pool.shareable_summary
    if summary is None:
        return "-"
    capacity = ", ".join(f"{c.name} {c.consumed}/{c.total}" for c in summary.capacity)
    shares = plural(summary.shares, "share")
    return f"{shares}; {capacity}" if capacity else shares


def pool_table(found: DeviceAvailability, wide: bool) -> Table:
    header = ["DRIVER", "POOL", "NODE", "ZONE", "TOTAL", "ALLOCATED", "FREE", "TAINTED"]
    if wide:
        header += ["COUNTERS (CONSUMED/CAPACITY)", "SHARED (CONSUMED/TOTAL)"]
    rows = []
    for pool in found.pools:
        row = [pool.driver, pool.pool_name, pool.node_name or "-", pool.zone or "-", *_counts(pool.devices)]
        if wide:
            row += [_counters(pool), _shared(pool)]
        rows.append((*row, pool.validation_error or ""))
    return Table((*header, "NOTE"), rows)


def _zones(device_class: DeviceClassAvailability) -> str:
    return (
        ", ".join(
            f"{z.zone} {z.devices.available_devices}/{z.devices.total_devices}" for z in device_class.zones
        )
        or "-"
    )


def _class_note(device_class: DeviceClassAvailability) -> str:
    if device_class.selector_error:
        return f"admits nothing: {device_class.selector_error}"
    if device_class.selector_failures:
        failed = plural(device_class.selector_failures, "device")
        return f"selectors failed on {failed}: {device_class.selector_failure}"
    return ""


def class_table(found: DeviceAvailability) -> Table:
    rows = [(c.name, str(c.pools), *_counts(c.devices), _zones(c), _class_note(c)) for c in found.classes]
    header = ("CLASS", "POOLS", "TOTAL", "ALLOCATED", "FREE", "TAINTED", "FREE/TOTAL PER ZONE", "NOTE")
    return Table(header, rows)


def summary(found: DeviceAvailability) -> str:
    counted = [p.devices for p in found.pools if p.devices is not None]
    total = sum(c.total_devices for c in counted)
    allocated = sum(c.allocated_devices for c in counted)
    free = sum(c.available_devices for c in counted)
    unavailable = sum(c.unavailable_devices for c in counted)
    incomplete = len(found.pools) - len(counted)
    line = (
        f"{plural(found.pool_count, 'pool')}, {plural(total, 'device')}: {allocated} allocated, "
        f"{free} free, {unavailable} tainted and not allocated"
    )
    return line + (f"; {plural(incomplete, 'incomplete pool')} not counted" if incomplete else "")


def print_tables(found: DeviceAvailability, out: TextIO, wide: bool, painted: Style = PLAIN) -> None:
    if found.pools:
        print_table(pool_table(found, wide), out, painted)
        print(file=out)
    if found.classes:
        print_table(class_table(found), out, painted)
        print(file=out)
    print(summary(found), file=out)
