"""Pool gathering and shared counters across nodes, compared with upstream 1.36 by reading it.

Second-pair-of-eyes checks the upstream table does not cover: pools whose slices live on several
nodes, generations and slice counts that disagree, counter slices with a nodeName, per-device node
selection with node selectors, and the Allocator-wide counter cache that outlives one node.
Upstream: ``GatherPools``/``buildPool``/``checkSlicesInPool`` (pools_incubating.go) and
``NewAllocator``/``Allocate``/``checkAvailableCounters``/``createNodeSelector``
(allocator_incubating.go), dra-reference 4.3, 4.4, 4.10, 4.15. Every expectation below is derived
from those functions, as the comment on each test explains.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.allocator import AllocatedState, AllocationOutcome, Allocator, DeviceID, Features
from policies.api.core import Node
from policies.api.kinds import decode
from policies.api.resource import API_VERSION, DeviceClass, ResourceClaim, ResourceSlice

GPU = "gpu.example.com"
NIC = "nic.example.com"


def node(name: str, **labels: str) -> Node:
    obj = decode({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    assert isinstance(obj, Node)
    return obj


def driver_class(name: str, expression: str) -> DeviceClass:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )
    assert isinstance(obj, DeviceClass)
    return obj


CLASSES = {
    "gpu": driver_class("gpu", f'device.driver == "{GPU}"'),
    "nic": driver_class("nic", f'device.driver == "{NIC}"'),
    "any": driver_class("any", "true"),
}


def pool_slice(
    name: str,
    driver: str,
    pool: str,
    devices: list[str | dict[str, Any]],
    *,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> ResourceSlice:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        **spec,
    }
    if devices:
        body["devices"] = [{"name": d} if isinstance(d, str) else d for d in devices]
    obj = decode(
        {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def counters(**sets: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": s, "counters": {c: {"value": v} for c, v in cs.items()}} for s, cs in sets.items()]


def consuming(name: str, counter_set: str, **amounts: str) -> dict[str, Any]:
    return {
        "name": name,
        "consumesCounters": [
            {"counterSet": counter_set, "counters": {c: {"value": v} for c, v in amounts.items()}}
        ],
    }


def claim(name: str, class_name: str, count: int = 1, mode: str = "ExactCount") -> ResourceClaim:
    exactly: dict[str, Any] = {"deviceClassName": class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "req", "exactly": exactly}]}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def allocator(slices: list[ResourceSlice], *, allocated: frozenset[DeviceID] = frozenset()) -> Allocator:
    return Allocator(Features(), AllocatedState(allocated_devices=allocated), CLASSES, slices)


def devices(outcome: AllocationOutcome) -> list[str] | None:
    """``driver/pool/device`` of the only claim's results; None when it does not fit (no error)."""
    assert outcome.error is None, str(outcome.error)
    if outcome.results is None:
        return None
    (only,) = outcome.results
    assert only.devices is not None
    return [f"{r.driver}/{r.pool}/{r.device}" for r in only.devices.results or []]


NODE1 = node("node-1", region="r1")
NODE2 = node("node-2", region="r2")


# --- generations and slice counts ------------------------------------------------------------------------


def generations() -> list[ResourceSlice]:
    """Pool p (2 slices): generation 1 on both nodes, generation 2 so far published for node-2 only."""
    return [
        pool_slice("p-n1-g1", GPU, "p", ["a"], count=2, nodeName="node-1"),
        pool_slice("p-n2-g1", GPU, "p", ["b"], count=2, nodeName="node-2"),
        pool_slice("p-n2-g2", GPU, "p", ["c"], generation=2, count=2, nodeName="node-2"),
    ]


def test_newer_generation_on_another_node_makes_the_pool_obsolete() -> None:
    # node-1 sees only p-n1-g1 (1 of 2 slices); checkSlicesInPool finds a generation-2 slice
    # elsewhere -> the pool is obsolete and silently dropped: no fit, no error, even for All.
    alloc = allocator(generations())
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) is None
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu", mode="All")])) is None


def test_newest_generation_with_missing_slices_is_incomplete() -> None:
    # node-2: addSlice keeps only generation 2 (1 of 2 slices, and only 1 exists cluster-wide) ->
    # incomplete: ExactCount does not fit, All is an error naming the pool.
    alloc = allocator(generations())
    assert devices(alloc.allocate(NODE2, [claim("c", "gpu")])) is None
    outcome = alloc.allocate(NODE2, [claim("c", "gpu", mode="All")])
    assert outcome.results is None and outcome.error is not None
    assert f"asks for all devices, but resource pool {GPU}/p is currently being updated" in str(outcome.error)


def test_pool_complete_counting_slices_for_other_nodes() -> None:
    # node-1 sees 1 of 2 slices; the whole cluster has both at generation 1 -> complete, and only
    # the node's own slice is searched (All takes just "a").
    slices = generations()[:2]
    alloc = allocator(slices)
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu", mode="All")])) == [f"{GPU}/p/a"]


def mismatched_counts(first_count: int, second_count: int) -> list[ResourceSlice]:
    return [
        pool_slice("x-1", GPU, "p", ["a"], count=first_count, nodeName="node-1"),
        pool_slice("x-2", GPU, "p", ["b"], count=second_count, nodeName="node-1"),
    ]


def test_slice_count_of_the_first_slice_seen_decides() -> None:
    # GatherPools compares len(slices) with slicesForPool[0].Spec.Pool.ResourceSliceCount: the first
    # slice in input order (slicesOnNode keeps the order of NewAllocator's slice list). With counts
    # 3 then 2 the pool has 2 != 3 slices -> incomplete; with 2 then 3 it is complete.
    assert devices(allocator(mismatched_counts(3, 2)).allocate(NODE1, [claim("c", "gpu")])) is None
    assert devices(allocator(mismatched_counts(2, 3)).allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/a"]


def test_duplicate_device_on_a_slice_for_another_node_does_not_invalidate_the_pool_here() -> None:
    # buildPool validates device names only across the slices targeting the node, so node-1 uses
    # the pool; on node-2 the same pool is invalid (duplicate device name): no fit, and Allocate
    # then returns the non-fatal "invalid resource pools were encountered".
    slices = [
        pool_slice("d-1", GPU, "p", ["a"], count=2, nodeName="node-1"),
        pool_slice("d-2", GPU, "p", ["b", "b"], count=2, nodeName="node-2"),
    ]
    alloc = allocator(slices)
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/a"]
    outcome = alloc.allocate(NODE2, [claim("c", "gpu")])
    assert outcome.results is None
    assert str(outcome.error) == "invalid resource pools were encountered"


# --- per-device node selection ---------------------------------------------------------------------------


def per_device() -> list[ResourceSlice]:
    def selector(region: str) -> dict[str, Any]:
        return {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "region", "operator": "In", "values": [region]}]}
            ]
        }

    return [
        pool_slice(
            "fabric",
            GPU,
            "fabric",
            [
                {"name": "far", "nodeSelector": selector("r2")},
                {"name": "near", "nodeSelector": selector("r1")},
                {"name": "everywhere", "allNodes": True},
                {"name": "local", "nodeName": "node-1"},
            ],
            perDeviceNodeSelection=True,
        )
    ]


def test_per_device_node_selectors_choose_devices_and_shape_the_result() -> None:
    # GatherPools: the slice is relevant because some device matches node-1; isSelectable skips
    # "far" (its own selector does not match). createNodeSelector uses the device's own fields:
    # "near" contributes its one-term selector, "everywhere" nothing, "local" pins to the node.
    alloc = allocator(per_device())
    outcome = alloc.allocate(NODE1, [claim("c", "gpu", count=2)])
    assert devices(outcome) == [f"{GPU}/fabric/near", f"{GPU}/fabric/everywhere"]
    assert outcome.results is not None
    selector = outcome.results[0].node_selector
    assert selector is not None
    assert selector.to_json() == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]
    }
    pinned = alloc.allocate(NODE1, [claim("c", "gpu", count=3)])
    assert devices(pinned) == [f"{GPU}/fabric/near", f"{GPU}/fabric/everywhere", f"{GPU}/fabric/local"]
    assert pinned.results is not None and pinned.results[0].node_selector is not None
    assert pinned.results[0].node_selector.to_json() == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }


# --- shared counters -------------------------------------------------------------------------------------


def test_counter_slice_with_node_name_is_shared_in_1_36() -> None:
    # NewAllocator (1.36): a slice with sharedCounters goes to the shared list even with nodeName,
    # and GatherPools treats counter slices as always relevant. So node-1 sees the counter set
    # published with nodeName node-2 and can use its partitions (8 units, 6 each: one fits).
    # (1.37 indexes such a slice per node; node-1 would then miss the set -> invalid pool.)
    slices = [
        pool_slice(
            "counters", GPU, "p", [], count=2, nodeName="node-2", sharedCounters=counters(mem={"units": "8"})
        ),
        pool_slice(
            "parts",
            GPU,
            "p",
            [consuming("part-0", "mem", units="6"), consuming("part-1", "mem", units="6")],
            count=2,
            nodeName="node-1",
        ),
    ]
    alloc = allocator(slices)
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/part-0"]
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu", count=2)])) is None


def test_allocated_devices_on_other_nodes_consume_the_pool_counters() -> None:
    # checkAvailableCounters subtracts the consumption of allocated devices in both
    # DeviceSlicesTargetingNode and DeviceSlicesNotTargetingNode: node-2's two allocated
    # partitions use the whole set, so node-1's partition does not fit; with one allocated it does.
    slices = [
        pool_slice(
            "counters", GPU, "p", [], count=3, allNodes=True, sharedCounters=counters(mem={"units": "8"})
        ),
        pool_slice("n1", GPU, "p", [consuming("a", "mem", units="4")], count=3, nodeName="node-1"),
        pool_slice(
            "n2",
            GPU,
            "p",
            [consuming("b", "mem", units="4"), consuming("c", "mem", units="4")],
            count=3,
            nodeName="node-2",
        ),
    ]
    both = frozenset({DeviceID(GPU, "p", "b"), DeviceID(GPU, "p", "c")})
    assert devices(allocator(slices, allocated=both).allocate(NODE1, [claim("c", "gpu")])) is None
    one = frozenset({DeviceID(GPU, "p", "b")})
    assert devices(allocator(slices, allocated=one).allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/a"]


def same_named_slice_pool(*, broken: bool = False) -> list[ResourceSlice]:
    """Pool p (3 slices): a counter slice, and two slices both named "n" for node-1 and node-2."""
    other = consuming("b", "nope" if broken else "mem", units="6")
    return [
        pool_slice(
            "counters", GPU, "p", [], count=3, allNodes=True, sharedCounters=counters(mem={"units": "8"})
        ),
        pool_slice("n", GPU, "p", [consuming("a", "mem", units="6")], count=3, nodeName="node-1"),
        pool_slice("n", GPU, "p", [other], count=3, nodeName="node-2"),
    ]


def test_slices_not_targeting_the_node_are_told_apart_by_name() -> None:
    # buildPool (pools_incubating.go, like pools_experimental.go) collects the pool's slices for
    # other nodes as "every slice of the generation whose *name* is not among the node's slices".
    # A node-2 slice that shares its name with node-1's slice is therefore left out: its allocated
    # device b does not consume the counter set (so a still fits on node-1), and its reference to a
    # counter set that does not exist does not make the pool invalid.
    allocated = frozenset({DeviceID(GPU, "p", "b")})
    outcome = allocator(same_named_slice_pool(), allocated=allocated).allocate(NODE1, [claim("c", "gpu")])
    assert devices(outcome) == [f"{GPU}/p/a"]
    outcome = allocator(same_named_slice_pool(broken=True)).allocate(NODE1, [claim("c", "gpu")])
    assert devices(outcome) == [f"{GPU}/p/a"]


def test_counter_cache_keyed_by_pool_name_outlives_the_node() -> None:
    # Allocator.availableCounters is filled once per pool *name* and kept for the Allocator's
    # lifetime (the scheduler builds one Allocator per pod and asks it about every node). node-1
    # fills the "p" entry with the GPU pool's counter sets; on node-2 the NIC pool also named "p"
    # then checks its consumption against the GPU sets only, so two NICs that each take the whole
    # NIC set both fit. A fresh Allocator asked about node-2 alone refuses the second NIC.
    slices = [
        pool_slice(
            "gpu",
            GPU,
            "p",
            [consuming("gpu-0", "gpu-mem", units="1")],
            count=2,
            nodeName="node-1",
        ),
        pool_slice(
            "gpu-counters",
            GPU,
            "p",
            [],
            count=2,
            allNodes=True,
            sharedCounters=counters(**{"gpu-mem": {"units": "8"}}),
        ),
        pool_slice(
            "nic-counters",
            NIC,
            "p",
            [],
            count=2,
            allNodes=True,
            sharedCounters=counters(lanes={"lanes": "4"}),
        ),
        pool_slice(
            "nic",
            NIC,
            "p",
            [consuming("nic-0", "lanes", lanes="4"), consuming("nic-1", "lanes", lanes="4")],
            count=2,
            nodeName="node-2",
        ),
    ]
    fresh = allocator(slices)
    assert devices(fresh.allocate(NODE2, [claim("c", "nic", count=2)])) is None

    warm = allocator(slices)
    assert devices(warm.allocate(NODE1, [claim("c", "any", count=2)])) is None  # only gpu-0 there
    assert devices(warm.allocate(NODE2, [claim("c", "nic", count=2)])) == [f"{NIC}/p/nic-0", f"{NIC}/p/nic-1"]


def test_pool_with_an_empty_binding_conditions_list_still_goes_last() -> None:
    # GatherPools/poolHasBindingConditions tests `device.BindingConditions != nil`: an explicitly
    # empty list (kept by a JSON/YAML decode) moves the pool behind the others, although isSelectable
    # (len(...) > 0) does not treat the device as having conditions. So pool "a" is searched after "b".
    slices = [
        pool_slice("a", GPU, "a", [{"name": "dev", "bindingConditions": []}], nodeName="node-1"),
        pool_slice("b", GPU, "b", ["dev"], nodeName="node-1"),
    ]
    assert devices(allocator(slices).allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/b/dev"]


# --- the variant structured.NewAllocator picks ------------------------------------------------------------

STABLE_ONLY = Features(
    admin_access=True,
    prioritized_list=True,
    partitionable_devices=True,
    device_taints=True,
    device_binding_and_status=False,
    consumable_capacity=False,
    list_type_attributes=False,
)


def unsorted_pool() -> list[ResourceSlice]:
    return [
        pool_slice("slice-b", GPU, "p", ["b"], count=2, nodeName="node-1"),
        pool_slice("slice-a", GPU, "p", ["a"], count=2, nodeName="node-1"),
    ]


def test_incubating_variant_searches_slices_by_name() -> None:
    # Default (1.36 scheduler) features need the incubating variant: buildPool sorts a pool's
    # slices by name (upstream case lexicographical-sorting-slices), so slice-a's device comes first.
    alloc = Allocator(Features(), AllocatedState(), CLASSES, unsorted_pool())
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/a"]


@pytest.mark.xfail(
    strict=True,
    reason="not emulated by design (issue 4 names the incubating variant as the reference): draguard "
    "always runs it; upstream structured.NewAllocator (allocator.go) picks 'stable' for stable-only "
    "feature sets, which keeps a pool's slices in input order (dra-reference 4.1, 5.16)",
)
def test_stable_variant_searches_slices_in_input_order() -> None:
    # structured.NewAllocator (allocator.go) uses the first variant whose supported features cover
    # the requested ones; with only AdminAccess/PrioritizedList/PartitionableDevices/DeviceTaints
    # that is "stable", whose GatherPools keeps each pool's slices in the order given and does not
    # sort them (the lexicographical-sorting tests exist for incubating/experimental only,
    # dra-reference 4.1 and 5.16). So slice-b's device comes first.
    alloc = Allocator(STABLE_ONLY, AllocatedState(), CLASSES, unsorted_pool())
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/b"]


def test_without_partitionable_devices_counter_slices_still_complete_the_pool() -> None:
    # GatherPools skips slices with sharedCounters when PartitionableDevices is off, but
    # checkSlicesInPool counts every slice of the generation in the cluster, so the pool (2 slices)
    # is complete; allocateDevice then refuses devices that consume counters, and the plain one is used.
    slices = [
        pool_slice(
            "counters", GPU, "p", [], count=2, nodeName="node-1", sharedCounters=counters(mem={"units": "8"})
        ),
        pool_slice(
            "devs", GPU, "p", [consuming("part", "mem", units="4"), "whole"], count=2, nodeName="node-1"
        ),
    ]
    off = Features(partitionable_devices=False)
    alloc = Allocator(off, AllocatedState(), CLASSES, slices)
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu")])) == [f"{GPU}/p/whole"]
    assert devices(alloc.allocate(NODE1, [claim("c", "gpu", count=2)])) is None


# --- explanations and quick_reject must not change answers, also for later nodes ---------------------------


def colliding_pools() -> list[ResourceSlice]:
    """GPU and NIC pools both named "p": GPU devices on both nodes, two whole-set NICs on node-2 only."""
    return [
        pool_slice(
            "gpu-counters",
            GPU,
            "p",
            [],
            count=3,
            allNodes=True,
            sharedCounters=counters(**{"gpu-mem": {"units": "8"}}),
        ),
        pool_slice(
            "gpu-n1", GPU, "p", [consuming("gpu-0", "gpu-mem", units="1")], count=3, nodeName="node-1"
        ),
        pool_slice(
            "gpu-n2", GPU, "p", [consuming("gpu-1", "gpu-mem", units="1")], count=3, nodeName="node-2"
        ),
        pool_slice(
            "nic-counters",
            NIC,
            "p",
            [],
            count=2,
            allNodes=True,
            sharedCounters=counters(lanes={"lanes": "4"}),
        ),
        pool_slice(
            "nic-n2",
            NIC,
            "p",
            [consuming("nic-0", "lanes", lanes="4"), consuming("nic-1", "lanes", lanes="4")],
            count=2,
            nodeName="node-2",
        ),
    ]


def nics_then_gpu() -> ResourceClaim:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "nics",
                            "exactly": {"deviceClassName": "nic", "allocationMode": "ExactCount", "count": 2},
                        },
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
                        },
                    ]
                }
            },
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


@pytest.mark.parametrize(
    "options",
    [{"explain": False}, {"explain": True}, {"quick_reject": True, "explain": False}],
    ids=["plain", "explain", "quick_reject"],
)
def test_side_checks_leave_the_counter_cache_as_the_search_would(options: dict[str, bool]) -> None:
    # Upstream, node by node on one Allocator: node-1 has no NIC, so allocateOne fails on the first
    # request without ever calling checkAvailableCounters; node-2 then fills the pool-name-keyed
    # "p" cache entry from the NIC pool (lanes 4) and refuses the second NIC: no fit on either node.
    # Work upstream does not do (explaining node-1's failure, quick_reject's pre-check) must not
    # fill that cache from devices the search never reached: if node-1 caches the GPU pool's sets
    # under "p", node-2's NICs are checked against GPU counters and both fit.
    alloc = allocator(colliding_pools())
    claims = [nics_then_gpu()]
    assert devices(alloc.allocate(NODE1, claims, **options)) is None
    assert devices(alloc.allocate(NODE2, claims, **options)) is None
