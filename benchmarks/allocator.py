"""Allocator speed per Allocate call on issue 18's six shapes, against upstream Go's medians.

Run: ``python benchmarks/allocator.py [--quick] [--profile SHAPE]``.

What one call is. kube-scheduler's DynamicResources plugin builds one allocator per pod in PreFilter
(``structured.NewAllocator`` over the allocated state it gathered) and calls ``Allocate`` once per
node in Filter (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``); Go's
``Allocate`` then gathers the node's pools, validates the requests, searches and builds the
results. draguard's dry run does the same with one Allocator per cluster snapshot
(``Prepared.of``), one fork of it per question (``DryRun``) and one ``allocate(node, claims,
quick_reject=True)`` per node from its DRA plugin (``policies/scheduler/dynamicresources.py``), here
with the results built, as Go's Allocate builds them. So every timed call is one ``allocate`` on a
fork made for that round (a new pod), the fork itself untimed as PreFilter is; a shape with
several nodes asks each of them once per round. Warm means what it means for a server answering
dry runs: the snapshot's allocator has been asked before, so its per-snapshot work (digested
devices, selector verdicts, pools per node, what each request consumes) is done; Go's figures are
warm in the same sense (CEL programs cached).

The Go figures are the issue's (upstream 1.36.2 built locally, quiet 2-core machine, median per
Allocate call): there is no Go toolchain here, so they are named reference figures, not measured.
To make this machine's speed visible, each shape also times a floor in the same run: a plain
Python loop over the same devices with precomputed selector verdicts and none of the allocator's
bookkeeping. If the floor is much slower than the README's, so is everything else.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import math
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script: put the repository root where the script directory was, so that a benchmark
# module named like a library (benchmarks/cel.py) cannot shadow it.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from policies.api.base import TypedObject  # noqa: E402
from policies.api.kinds import decode  # noqa: E402
from policies.api.resource import ResourceClaim  # noqa: E402
from policies.cel import bind_device, compile_expression  # noqa: E402
from policies.dryrun import DryRun, FeatureGates, Prepared, Question, synthetic_pod  # noqa: E402
from policies.snapshot import Snapshot  # noqa: E402

DRIVER = "gpu.example.com"
NIC_DRIVER = "net.example.com"
MEMORY_SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
MODEL_SELECTOR = f'device.attributes["{DRIVER}"].model == "a100"'
# Turns each shape's warm calls are split into (see measure).
TURNS = 10


def obj(data: dict[str, Any]) -> TypedObject:
    decoded = decode(data)
    assert isinstance(decoded, TypedObject)
    return decoded


def device_class(name: str, driver: str) -> TypedObject:
    selector = {"cel": {"expression": f'device.driver == "{driver}"'}}
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [selector]},
        }
    )


def node(name: str) -> TypedObject:
    return obj({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": "a"}}})


def gpu(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": f"gpu-{i}",
        "attributes": {
            "model": {"string": "a100"},
            "numa": {"int": i % 2},
            "driverVersion": {"version": "1.2.0"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
        **extra,
    }


def slice_(
    name: str,
    node_name: str,
    devices: list[dict[str, Any]] | None,
    *,
    driver: str = DRIVER,
    pool: str | None = None,
    count: int = 1,
    **spec: Any,
) -> TypedObject:
    """A slice of ``node_name``'s pool (or ``pool``); ``devices=None`` for a counters-only slice."""
    body: dict[str, Any] = {
        "driver": driver,
        "nodeName": node_name,
        "pool": {"name": pool or node_name, "generation": 1, "resourceSliceCount": count},
        **spec,
    }
    if devices is not None:
        body["devices"] = devices
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": body,
        }
    )


def request(
    name: str, count: int, *selectors: str, device_class: str = "gpu", capacity: dict[str, str] | None = None
) -> dict[str, Any]:
    """A request for ``count`` devices; ``count=0`` asks for all of them (allocation mode All)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "All"}
    if count:
        exactly |= {"allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None = None,
    allocated: list[dict[str, Any]] | None = None,
) -> ResourceClaim:
    """A claim; ``allocated``: the device results of its ``status.allocation``."""
    data: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"devices": {"requests": requests, "constraints": constraints or []}},
    }
    if allocated is not None:
        data["status"] = {"allocation": {"devices": {"results": allocated}}}
    c = decode(data)
    assert isinstance(c, ResourceClaim)
    return c


@dataclass
class Shape:
    """One scenario of the issue: the cluster, the pod's claims and the nodes asked in turn."""

    name: str
    go_us: float | None  # upstream Go's median per Allocate call, from issue 18's table
    objects: list[TypedObject]
    claims: list[ResourceClaim]
    nodes: list[str]
    # Request selectors the floor checks (the class selector is checked too).
    selectors: tuple[str, ...] = ()


def single_slice() -> Shape:
    return Shape(
        "1 slice of 128 GPUs, claim for 8, quantity selector",
        185,
        [device_class("gpu", DRIVER), node("node-1"), slice_("n1", "node-1", [gpu(i) for i in range(128)])],
        [claim("c", [request("gpus", 8, MEMORY_SELECTOR)])],
        ["node-1"],
        (MEMORY_SELECTOR,),
    )


def match_attribute() -> Shape:
    c = claim(
        "c",
        [request("a", 4, MEMORY_SELECTOR), request("b", 4, MEMORY_SELECTOR)],
        [{"matchAttribute": f"{DRIVER}/numa"}],
    )
    return Shape(
        "128 GPUs, two requests of 4, matchAttribute on NUMA",
        652,
        [device_class("gpu", DRIVER), node("node-1"), slice_("n1", "node-1", [gpu(i) for i in range(128)])],
        [c],
        ["node-1"],
        (MEMORY_SELECTOR,),
    )


def eight_slices() -> Shape:
    slices = [
        slice_(f"n1-{k}", "node-1", [gpu(k * 128 + i) for i in range(128)], pool="node-1", count=8)
        for k in range(8)
    ]
    return Shape(
        "8 slices x 128 GPUs, claim for 32, two selectors",
        1129,
        [device_class("gpu", DRIVER), node("node-1"), *slices],
        [claim("c", [request("gpus", 32, MEMORY_SELECTOR, MODEL_SELECTOR)])],
        ["node-1"],
        (MEMORY_SELECTOR, MODEL_SELECTOR),
    )


def partitionable() -> Shape:
    # One physical GPU with 8 memory units shared by 16 partitions: 8 of 2 units listed first, then
    # 8 of 1 unit. The claim wants 4 partitions of any size and 1 of at least 2 units. First fit
    # gives the 4 to 2-unit partitions (all 8 units), so the search has to work through the
    # combinations until the 4 leave 2 units for the last request.
    counters = slice_(
        "n1-counters",
        "node-1",
        None,
        pool="node-1",
        count=2,
        sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}],
    )
    parts = []
    for i in range(16):
        units = "2" if i < 8 else "1"
        parts.append(
            gpu(
                i,
                consumesCounters=[{"counterSet": "gpu-0", "counters": {"memory": {"value": units}}}],
                capacity={"memory": {"value": units}},
            )
        )
    devices = slice_("n1-parts", "node-1", parts, pool="node-1", count=2)
    big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("2")) >= 0'
    return Shape(
        "partitionable GPU, 16 partitions, backtracking",
        367,
        [device_class("gpu", DRIVER), node("node-1"), counters, devices],
        [claim("c", [request("small", 4), request("big", 1, big)])],
        ["node-1"],
        (big,),
    )


def gpu_cluster(nodes: int) -> list[TypedObject]:
    """``nodes`` nodes x 8 GPUs, 40% allocated (3 or 4 GPUs of each node taken by a claim)."""
    objects: list[TypedObject] = [device_class("gpu", DRIVER)]
    for n in range(nodes):
        name = f"node-{n}"
        objects.append(node(name))
        objects.append(slice_(f"{name}-gpu", name, [gpu(i) for i in range(8)]))
        taken = 3 if n % 5 < 3 else 4  # 3.2 of 8 on average = 40%
        results = [
            {"request": "gpus", "driver": DRIVER, "pool": name, "device": f"gpu-{i}"} for i in range(taken)
        ]
        objects.append(claim(f"busy-{n}", [request("gpus", taken)], allocated=results))
    return objects


def many_nodes() -> Shape:
    return Shape(
        "10 nodes, 40% of devices allocated, allocate on each",
        72,
        gpu_cluster(10),
        [claim("train", [request("gpus", 2, MEMORY_SELECTOR)])],
        [f"node-{n}" for n in range(10)],
        (MEMORY_SELECTOR,),
    )


def nic(k: int, policies: dict[str, dict[str, Any]], **attributes: Any) -> dict[str, Any]:
    """A multi-allocatable NIC with 100Gi of bandwidth (and 64 queues if a policy names them)."""
    capacity: dict[str, Any] = {"bandwidth": {"value": "100Gi"}}
    if "queues" in policies:
        capacity["queues"] = {"value": "64"}
    for name, policy in policies.items():
        capacity[name]["requestPolicy"] = policy
    return {
        "name": f"nic-{k}",
        "allowMultipleAllocations": True,
        "attributes": {"model": {"string": "cx7"}, **{a: {"int": v} for a, v in attributes.items()}},
        "capacity": capacity,
    }


def shares(used: dict[int, list[dict[str, str]]]) -> list[ResourceClaim]:
    """One allocated claim per existing share: ``used`` maps a NIC to what each of its shares took."""
    claims: list[ResourceClaim] = []
    for k, consumed in used.items():
        for amounts in consumed:
            i = len(claims)
            result = {
                "request": "share",
                "driver": NIC_DRIVER,
                "pool": "node-1",
                "device": f"nic-{k}",
                "shareID": f"00000000-0000-4000-8000-{i:012d}",
                "consumedCapacity": amounts,
            }
            claims.append(claim(f"share-{i}", [request("share", 1, device_class="nic")], allocated=[result]))
    return claims


def nic_shape(name: str, nics: list[dict[str, Any]], existing: list[ResourceClaim],
              wanted: list[ResourceClaim], go_us: float | None = None) -> Shape:  # fmt: skip
    """A consumable-capacity shape: one node's NICs, their existing shares, the pod's claims."""
    nodes = [device_class("nic", NIC_DRIVER), node("node-1"), slice_("n1", "node-1", nics, driver=NIC_DRIVER)]
    return Shape(name, go_us, [*nodes, *existing], wanted, ["node-1"])


def consumable() -> Shape:
    # Four multi-allocatable NICs of 100Gi bandwidth (requests rounded up to whole Gi, 1Gi by
    # default), five existing shares on each: 19Gi shares fill nic-0..2 to 95Gi, 10Gi shares fill
    # nic-3 to 50Gi. One more share of 10Gi: the search checks the capacity of all four NICs and
    # lands on nic-3.
    policy = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    used = {k: [{"bandwidth": "10Gi" if k == 3 else "19Gi"}] * 5 for k in range(4)}
    return nic_shape(
        "consumable capacity: 4 shared NICs, 20 existing shares, one more",
        [nic(k, {"bandwidth": policy}) for k in range(4)],
        shares(used),
        [claim("c", [request("share", 1, device_class="nic", capacity={"bandwidth": "10Gi"})])],
        go_us=55,
    )


STEP_2GI = {"default": "1Gi", "validRange": {"min": "1Gi", "max": "64Gi", "step": "2Gi"}}
QUEUES = {"default": "1", "validValues": ["1", "2", "4", "8", "16"]}


def cc_many() -> Shape:
    # 16 NICs with 32 shares each (512 shares); a 6Gi request rounds up to 7Gi (1Gi + 3 steps of
    # 2Gi): only the last two NICs have room, so the search checks the capacity of all sixteen.
    used = {k: [{"bandwidth": "3Gi"}] * 32 if k < 14 else [{"bandwidth": "1Gi"}] * 32 for k in range(16)}
    return nic_shape(
        "cc: 16 NICs, 512 shares, step rounding, 2 of 16 fit",
        [nic(k, {"bandwidth": STEP_2GI}) for k in range(16)],
        shares(used),
        [claim("c", [request("share", 1, device_class="nic", capacity={"bandwidth": "6Gi"})])],
    )


def cc_claims() -> Shape:
    # 8 NICs on 4 PCIe roots, two capacities (bandwidth in steps, queues from a list), 206 shares
    # leaving 2 queues on nic-0..5 and 14 on nic-6 and nic-7. The pod has three claims of two
    # shares each, the two on distinct roots: "a" asks for 3 queues (rounded up to 4), which only
    # nic-6 and nic-7 have; "b" names no bandwidth and takes the policy's default.
    used = {k: [{"bandwidth": "3Gi", "queues": "2"}] * 25 + [{"bandwidth": "1Gi", "queues": "12"}] * (k < 6)
            for k in range(8)}  # fmt: skip
    nics = [nic(k, {"bandwidth": STEP_2GI, "queues": QUEUES}, pcieRoot=k % 4) for k in range(8)]
    wanted = [
        claim(
            f"c{c}",
            [
                request("a", 1, device_class="nic", capacity={"bandwidth": "5Gi", "queues": "3"}),
                request("b", 1, device_class="nic", capacity={"queues": "1"}),
            ],
            [{"distinctAttribute": f"{NIC_DRIVER}/pcieRoot"}],
        )
        for c in range(3)
    ]
    return nic_shape("cc: 8 NICs, 206 shares, 3 claims x 2 requests, distinctAttribute", nics,
                     shares(used), wanted)  # fmt: skip


def cc_all() -> Shape:
    # Allocation mode All with a capacity request on 12 NICs with 20 shares each, and a request for
    # 3 more shares of 4Gi (count > 1 on multi-allocatable devices) where half the NICs are full.
    used = {k: [{"bandwidth": "4Gi"}] * 20 if k % 2 else [{"bandwidth": "5Gi"}] * 19 for k in range(12)}
    wanted = [
        claim(
            "c",
            [
                request("every", 0, device_class="nic", capacity={"bandwidth": "1Gi"}),
                request("more", 3, device_class="nic", capacity={"bandwidth": "10Gi"}),
            ],
        )
    ]
    return nic_shape("cc: 12 NICs, 240 shares, allocation mode All + count 3",
                     [nic(k, {"bandwidth": STEP_2GI}) for k in range(12)], shares(used), wanted)  # fmt: skip


def cc_fail() -> Shape:
    # 64 NICs, 256 shares: the capacity request fails on 60 of them (full, or its 30Gi breaks the
    # validValues policy of some), count 2 lands on the last four.
    values = {"default": "1Gi", "validValues": ["1Gi", "10Gi", "25Gi", "40Gi", "100Gi"]}
    nics = [nic(k, {"bandwidth": values if k % 3 == 0 else STEP_2GI}) for k in range(64)]
    used = {k: [{"bandwidth": "20Gi"}] * 4 if k < 60 else [{"bandwidth": "1Gi"}] * 4 for k in range(64)}
    return nic_shape(
        "cc: 64 NICs, 256 shares, 60 refuse the amount, count 2",
        nics,
        shares(used),
        [claim("c", [request("share", 2, device_class="nic", capacity={"bandwidth": "30Gi"})])],
    )


# Consumable-capacity variants beyond issue 18's shape (issue 23): more devices and shares, request
# policies, several requests and claims, constraints, All mode. No Go figures: compared over time.
CONSUMABLE: dict[str, Callable[[], Shape]] = {
    "cc-many": cc_many,
    "cc-claims": cc_claims,
    "cc-all": cc_all,
    "cc-fail": cc_fail,
}

SHAPES: dict[str, Callable[[], Shape]] = {
    "single": single_slice,
    "match": match_attribute,
    "eight": eight_slices,
    "partitionable": partitionable,
    "nodes": many_nodes,
    "consumable": consumable,
}


# The clock calls are timed with: wall time by default; ``--clock thread`` takes this thread's CPU
# time, which other processes on a shared machine disturb less (they still share caches and cores).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread": time.thread_time}
clock = CLOCKS["wall"]


def per_call_us(rounds: int, calls_of_round: Callable[[], Sequence[Callable[[], object]]]) -> list[float]:
    """Each call of every round timed on its own, in microseconds (setting a round up is not timed)."""
    times = []
    now = clock
    for _ in range(rounds):
        for call in calls_of_round():
            start = now()
            call()
            times.append((now() - start) * 1e6)
    return times


def floor_calls(shape: Shape, snapshot: Snapshot) -> list[Callable[[], int]]:
    """Per asked node, the least a Python allocator does: walk its devices, check verdicts, count."""
    programs = [compile_expression(e) for c in snapshot.classes.values() for s in c.spec.selectors or []
                if s.cel is not None for e in [s.cel.expression]]  # fmt: skip
    programs += [compile_expression(e) for e in shape.selectors]
    wanted = sum(
        r.exactly.count or 0 for c in shape.claims for r in c.spec.devices.requests or [] if r.exactly
    )
    calls: list[Callable[[], int]] = []
    for name in shape.nodes:
        verdicts = [
            all(p.matches(bind_device(s.spec.driver, d)) for p in programs)
            for s in snapshot.slices
            if s.spec.node_name == name
            for d in s.spec.devices or []
        ]

        def run(verdicts: list[bool] = verdicts) -> int:
            taken = 0
            for ok in verdicts:
                if ok:
                    taken += 1
                    if taken == wanted:
                        break
            return taken

        calls.append(run)
    return calls


@dataclass
class Timed:
    """One shape being measured: a pod's calls, the floor's, and the times taken so far."""

    shape: Shape
    first: float  # the first call, on a cold snapshot allocator, in microseconds
    steps: float  # search steps per call
    pod_round: Callable[[], list[Callable[[], object]]]
    floors: list[Callable[[], int]]
    times: list[float] = field(default_factory=list)
    floor_times: list[float] = field(default_factory=list)

    def run(self, calls: int) -> None:
        rounds = max(1, calls // len(self.shape.nodes))
        self.times += per_call_us(rounds, self.pod_round)
        self.floor_times += per_call_us(rounds, lambda: self.floors)


def prepare(shape: Shape) -> Timed:
    """The shape's snapshot allocator, with the first (cold) call made and its answers checked."""
    gc.collect()
    snapshot = Snapshot.build([*shape.objects, *shape.claims])
    nodes = [snapshot.nodes[n] for n in shape.nodes]
    start = time.perf_counter()
    base = Prepared.of(snapshot, FeatureGates()).allocator
    fork = base.fork()
    outcomes = [fork.allocate(n, shape.claims, quick_reject=True) for n in nodes]
    first = (time.perf_counter() - start) * 1e6 / len(nodes)
    for n, outcome in zip(shape.nodes, outcomes, strict=True):
        if outcome.error is not None or outcome.results is None:
            raise SystemExit(f"{shape.name}: expected an allocation on {n}, got error={outcome.error}")

    def pod_round() -> list[Callable[[], object]]:
        pod = base.fork()
        return [functools.partial(pod.allocate, n, shape.claims, quick_reject=True) for n in nodes]

    steps = statistics.mean(o.invocations for o in outcomes)
    return Timed(shape, first, steps, pod_round, floor_calls(shape, snapshot))


def measure(timed: Sequence[Timed], calls: int) -> None:
    """``calls`` warm calls of every shape, in TURNS turns per shape, the shapes taking turns.

    This machine has spells of a few seconds at about half speed: measured one after another, a
    spell falls on one or two shapes entirely and doubles their medians; taking turns, it falls on
    a few turns of every shape, which moves no median much.
    """
    for _ in range(TURNS):
        for t in timed:
            t.run(max(1, calls // TURNS))


def bytecodes_per_call(timed: Timed) -> int:
    """Python bytecodes one warm call executes: a measure of the Python work that load on a shared
    machine does not move (work done in C, such as pydantic's validation, is not counted). Warm:
    two calls before (a scan list is rebuilt once the first call has computed selector verdicts)."""
    for _ in range(2):
        timed.pod_round()[0]()
    call = timed.pod_round()[0]
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        frame.f_trace_opcodes = True
        count += event == "opcode"
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def cluster_dry_run(nodes: int, repeat: int) -> tuple[float, float, int]:
    """5,000 nodes x 8 GPUs, 40% allocated; a pod-like claim for 2 GPUs asked on every node."""
    snapshot = Snapshot.build(gpu_cluster(nodes))
    want = claim("train", [request("gpus", 2, MEMORY_SELECTOR)])
    dry = DryRun(Prepared.of(snapshot, FeatureGates()))
    question = Question(synthetic_pod("default"), (want,))

    def everywhere() -> int:
        """The whole default profile's attempt (these nodes give no allocatable: DRA decides)."""
        return len(dry.outcome(question).fitting)

    start = time.perf_counter()
    fits = everywhere()
    first = (time.perf_counter() - start) * 1e3
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        everywhere()
        runs.append((time.perf_counter() - start) * 1e3)
    return first, statistics.median(runs), fits


def main(argv: Sequence[str] | None = None) -> int:
    global clock
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer calls, 500 nodes for the dry run")
    parser.add_argument(
        "--profile", choices=[*SHAPES, *CONSUMABLE, "cluster"], help="print a cProfile of one shape"
    )
    parser.add_argument(
        "--family",
        choices=["issue18", "consumable"],
        default="issue18",
        help="issue 18's six shapes against Go and the cluster dry run (default), or the "
        "consumable-capacity shape and its variants alone",
    )
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall", help="time calls by this clock")
    parser.add_argument(
        "--bytecodes", action="store_true", help="print the bytecodes a warm call executes per shape, untimed"
    )
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]
    calls = 50 if args.quick else 2000
    nodes = 500 if args.quick else 5000

    if args.profile:
        prof = cProfile.Profile()
        if args.profile == "cluster":
            prof.runcall(cluster_dry_run, nodes, 1)
        else:
            prof.runcall(measure, [prepare({**SHAPES, **CONSUMABLE}[args.profile]())], calls)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return 0

    family = SHAPES if args.family == "issue18" else {"consumable": consumable, **CONSUMABLE}
    timed = [prepare(build()) for build in family.values()]
    if args.bytecodes:
        for t in timed:
            print(f"{t.shape.name:66} {bytecodes_per_call(t):9} bytecodes per call")
        return 0
    header = ("first us", "median us", "Go us", "ratio", "floor us", "steps")
    print(f"{'shape':66} " + " ".join(f"{h:>9}" for h in header))
    measure(timed, calls)
    ratios = []
    for t in timed:
        median = statistics.median(t.times)
        go = f"{t.shape.go_us:9.0f} {median / t.shape.go_us:9.2f}" if t.shape.go_us else f"{'-':>9} {'-':>9}"
        if t.shape.go_us:
            ratios.append(median / t.shape.go_us)
        print(
            f"{t.shape.name:66} {t.first:9.1f} {median:9.1f} {go} "
            f"{statistics.median(t.floor_times):9.2f} {t.steps:9.0f}"
        )
    if args.family != "issue18":
        return 0
    geomean = math.exp(statistics.mean(math.log(r) for r in ratios))
    ok = max(ratios) <= 1.0 and geomean <= 0.5
    print(
        f"\nratios to upstream Go: worst {max(ratios):.2f} (target <= 1.0), geometric mean {geomean:.2f} "
        f"(target <= 0.5): {'met' if ok else 'MISSED'}"
    )
    first, median, fits = cluster_dry_run(nodes, 3 if args.quick else 5)
    met = median < 500 * nodes / 5000
    ok &= met
    print(
        f"whole-cluster dry run, {nodes} nodes x 8 GPUs, 40% allocated, claim for 2: "
        f"first {first:.0f} ms, median {median:.0f} ms, fits on {fits} nodes "
        f"(target < {500 * nodes / 5000:.0f} ms: {'met' if met else 'MISSED'})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
