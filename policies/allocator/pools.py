"""Which devices a node can use: slices picked per node, grouped into resource pools.

Upstream 1.36: ``GatherPools`` and ``buildPool`` in
``structured/internal/incubating/pools_incubating.go`` (dra-reference 4.3-4.4):

* a slice is relevant if it carries shared counters (always), or its ``nodeName`` / ``allNodes`` /
  ``nodeSelector`` matches the node, or (per-device node selection) any of its devices does;
  without partitionable devices, per-device-selection and counter slices are ignored;
* per pool only the highest generation counts; a pool missing slices is checked against *all*
  slices of the cluster: a newer generation elsewhere makes it obsolete (dropped), a complete
  generation makes it usable (the slices for other nodes still count for shared counters),
  anything else makes it incomplete;
* a pool is invalid for duplicate device names, duplicate counter sets, or counters that do not exist;
* slices are sorted by name, pools by (driver, pool), pools with binding conditions go last.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from policies.allocator.capacity import nanos
from policies.allocator.devices import DeviceInfo, SliceInfo
from policies.allocator.features import Features
from policies.allocator.nodes import NodeSelectorError, node_matches

if TYPE_CHECKING:
    from policies.allocator.counters import PoolCounters

CounterSets = dict[str, dict[str, int]]


class GatherError(ValueError):
    """Pool gathering failed (a node selector nodeaffinity cannot parse)."""


class Pool:
    """A resource pool as seen from one node."""

    __slots__ = (
        "counter_sets",
        "driver",
        "has_binding_conditions",
        "incomplete",
        "invalid_reason",
        "left",
        "name",
        "other_slices",
        "slices",
        "slices_seen",
        "slices_wanted",
    )

    def __init__(self, driver: str, name: str) -> None:
        self.driver = driver
        self.name = name
        self.incomplete = False
        self.invalid_reason: str | None = None
        # Device slices reachable from the node, in search order.
        self.slices: list[SliceInfo] = []
        # Slices of the pool for other nodes: they still consume shared counters.
        self.other_slices: list[SliceInfo] = []
        self.counter_sets: CounterSets = {}
        # What the allocated devices leave of the counters: counters.left_in() fills it on first use.
        self.left: PoolCounters | None = None
        self.has_binding_conditions = False
        self.slices_seen = 0
        self.slices_wanted = 0

    @property
    def invalid(self) -> bool:
        return self.invalid_reason is not None

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid_reason is None

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


# What a scan knows of a device before reaching it (ScanList.checked; see Search._scan_state).
CHECK = 0  # nothing: its selector and capacity checks run when it is reached
PASS = 1  # its selector and capacity checks pass whatever the search picks
# Its selectors pass and its capacity fits beside the existing shares: only shares the search
# itself picks on the device can leave too little (a multi-allocatable device).
PASS_UNLESS_SHARED = 2


class ScanList(NamedTuple):
    """The devices a request's scan visits, in order (see ``Search._scan_list``), with what is known
    of each before the search starts."""

    devices: list[DeviceInfo]
    # Per position: CHECK, PASS or PASS_UNLESS_SHARED.
    checked: list[int]
    # Per position: every device after it is checked, not shared, and consumes the same counters
    # as it (the same interned tuple): a counters refusal here is repeated by every one of them.
    alike_after: list[bool]

    @classmethod
    def of(cls, candidates: list[DeviceInfo], state: Callable[[DeviceInfo], int | None]) -> ScanList:
        """The candidates whose ``state`` is not None, with it as ``checked``."""
        devices, checked = [], []
        for device in candidates:
            known = state(device)
            if known is not None:
                devices.append(device)
                checked.append(known)
        alike_after = [True] * len(devices)
        for pos in range(len(devices) - 2, -1, -1):
            after = devices[pos + 1]
            alike_after[pos] = (
                alike_after[pos + 1]
                and checked[pos + 1] == PASS
                and not after.multi
                and after.counter_slots is devices[pos].counter_slots
            )
        return cls(devices, checked, alike_after)


class NodeView:
    """Everything one node sees, computed once per node and Allocator.

    Besides the pools and candidate devices, the view keeps the lists of candidates the search
    scans, per what a request's checks read (``scan_list``).
    """

    __slots__ = (
        "_pool_by_key",
        "_scan_lists",
        "_shared_names",
        "candidates",
        "device_on_node",
        "labels",
        "node_name",
        "pools",
        "verdicts_computed",
    )

    def __init__(
        self,
        node_name: str | None,
        labels: Mapping[str, str],
        pools: list[Pool],
        candidates: list[DeviceInfo],
        device_on_node: dict[int, bool | NodeSelectorError],
    ) -> None:
        self.node_name = node_name
        self.labels = labels
        self.pools = pools
        # Devices of usable pools in search order (pool, slice, device).
        self.candidates = candidates
        # Per-device node selection: device index -> reachable from the node (or the parse error).
        self.device_on_node = device_on_node
        self._pool_by_key = {(p.driver, p.name): p for p in pools}
        pools_named = Counter(p.name for p in pools)
        self._shared_names = frozenset(name for name, count in pools_named.items() if count > 1)
        # How many selector verdicts searches on this view have computed (see scan_list).
        self.verdicts_computed = 0
        self._scan_lists: dict[Hashable, tuple[int, ScanList]] = {}

    def scan_list(self, key: Hashable, state: Callable[[DeviceInfo], int | None]) -> ScanList:
        """The candidates a request's scan visits, by their ``state`` (see ``ScanList.of``), kept per
        ``key``.

        The search keys these lists by what ``state`` reads of a request (see
        ``Search._scan_list``), and ``state`` answers from selector verdicts already known.
        Verdicts never change for the Allocator's lifetime, they only become known; so a list is
        kept until searches on this view have computed new verdicts (``verdicts_computed``), and
        then rebuilt on its next use.
        """
        found = self._scan_lists.get(key)
        if found is not None and found[0] == self.verdicts_computed:
            return found[1]
        built = ScanList.of(self.candidates, state)
        self._scan_lists[key] = (self.verdicts_computed, built)
        return built

    def in_use_changed(self, own: bool) -> NodeView:
        """The view as gathered afresh once other devices are in use: the same pools, without their
        counters left, and devices, no scan lists; selector verdicts, kept on the devices, stand.
        ``own``: this view itself, changed; else a copy (the view is shared with another allocator)."""
        if not own:
            pools = [copy.copy(p) for p in self.pools]
            view = NodeView(self.node_name, self.labels, pools, self.candidates, self.device_on_node)
            return view.in_use_changed(True)
        self._scan_lists = {}
        for pool in self.pools:
            pool.left = None
        return self

    @property
    def any_invalid(self) -> bool:
        return any(p.invalid for p in self.pools)

    def shares_name(self, pool: Pool) -> bool:
        """Whether another pool on the node (of another driver) has the same name."""
        return pool.name in self._shared_names

    def pool_of(self, device: DeviceInfo) -> Pool:
        """The pool a candidate device belongs to."""
        info = device.slice
        return self._pool_by_key[info.driver, info.pool_name]


def gather(
    node_name: str | None,
    labels: Mapping[str, str],
    candidates: Iterable[SliceInfo],
    slices_of_pool: Mapping[tuple[str, str], Sequence[SliceInfo]],
    features: Features,
) -> NodeView:
    """Build the node's view; raises GatherError for malformed node selectors."""
    by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
    for info in candidates:
        if not features.partitionable_devices and (info.per_device_set or info.has_counters):
            continue
        if _relevant(info, node_name, labels):
            _add_slice(by_pool, info)

    pools = []
    for key, slices in by_pool.items():
        pool = _pool(key, slices, slices_of_pool.get(key, ()), features)
        if pool is not None:
            pools.append(pool)
    pools.sort(key=lambda p: (p.has_binding_conditions, p.driver, p.name))

    devices: list[DeviceInfo] = []
    on_node: dict[int, bool | NodeSelectorError] = {}
    for pool in pools:
        if not pool.usable:
            continue
        for info in pool.slices:
            devices += info.devices
            if info.per_device:
                for device in info.devices:
                    on_node[device.index] = _device_on_node(device, node_name, labels)
    return NodeView(node_name, labels, pools, devices, on_node)


def _relevant(info: SliceInfo, node_name: str | None, labels: Mapping[str, str]) -> bool:
    if info.has_counters:
        return True
    try:
        if info.node_name or info.all_nodes or info.node_selector is not None:
            return node_matches(
                node_name,
                labels,
                wanted_name=info.node_name,
                all_nodes=info.all_nodes,
                selector=info.node_selector,
            )
        if info.per_device:
            for device in info.devices:
                found = _device_on_node(device, node_name, labels)
                if isinstance(found, NodeSelectorError):
                    where = f"device {device.name} in slice {info.name}"
                    raise GatherError(f"failed to perform node selection for {where}: {found}")
                if found:
                    return True
            return False
    except NodeSelectorError as err:
        raise GatherError(f"failed to perform node selection for slice {info.name}: {err}") from None
    # Some future node-selection mode: not ours to use.
    return False


def _device_on_node(
    device: DeviceInfo, node_name: str | None, labels: Mapping[str, str]
) -> bool | NodeSelectorError:
    try:
        return node_matches(
            node_name,
            labels,
            wanted_name=device.node_name,
            all_nodes=device.all_nodes,
            selector=device.node_selector,
        )
    except NodeSelectorError as err:
        return err


def _add_slice(by_pool: dict[tuple[str, str], list[SliceInfo]], info: SliceInfo) -> None:
    """Keep only the slices of the highest generation seen for the pool."""
    key = (info.driver, info.pool_name)
    current = by_pool.get(key)
    if current is None or info.generation > current[0].generation:
        by_pool[key] = [info]
    elif info.generation == current[0].generation:
        current.append(info)


def _pool(
    key: tuple[str, str], slices: list[SliceInfo], whole_pool: Sequence[SliceInfo], features: Features
) -> Pool | None:
    """Complete, incomplete or invalid pool; ``None`` if a newer generation made it obsolete."""
    pool = Pool(*key)
    generation = slices[0].generation
    pool.slices_wanted = slices[0].slice_count
    pool.slices_seen = len(slices)
    if len(slices) == pool.slices_wanted:
        _build(pool, slices, [], features)
        return pool
    if any(s.generation > generation for s in whole_pool):
        return None
    same_generation = [s for s in whole_pool if s.generation == generation]
    pool.slices_seen = len(same_generation)
    if len(same_generation) != pool.slices_wanted:
        pool.incomplete = True
        return pool
    # Upstream buildPool tells the node's slices apart from the others by name, not identity: a slice
    # for another node that shares a name with one of the node's slices is left out entirely.
    seen = {s.name for s in slices}
    _build(pool, slices, [s for s in same_generation if s.name not in seen], features)
    return pool


def _build(pool: Pool, slices: list[SliceInfo], others: list[SliceInfo], features: Features) -> None:
    slices = sorted(slices, key=lambda s: s.name)
    if features.partitionable_devices:
        device_slices = [s for s in slices if not s.has_counters]
        counter_slices = [s for s in slices if s.has_counters]
    else:
        device_slices, counter_slices = slices, []
    pool.invalid_reason = _duplicate_device(device_slices)
    if pool.invalid_reason is None and features.partitionable_devices:
        counter_sets, pool.invalid_reason = _counter_sets(counter_slices)
        if pool.invalid_reason is None:
            pool.invalid_reason = _unknown_counter(counter_sets, slices) or _unknown_counter(
                counter_sets, others
            )
        pool.counter_sets = counter_sets
    if pool.invalid_reason is None:
        pool.slices = device_slices
        pool.other_slices = others
        # Upstream tests the list against nil: an explicitly empty list counts (isSelectable uses len()).
        pool.has_binding_conditions = any(
            d.binding_conditions is not None for s in device_slices for d in s.obj.spec.devices or ()
        )


def _duplicate_device(slices: list[SliceInfo]) -> str | None:
    names = [device.name for info in slices for device in info.obj.spec.devices or ()]
    if len(set(names)) == len(names):
        return None
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return f"duplicate device name {name}"
        seen.add(name)
    return None


def _counter_sets(slices: list[SliceInfo]) -> tuple[CounterSets, str | None]:
    sets: CounterSets = {}
    for info in slices:
        for counter_set in info.counter_sets:
            if counter_set.name in sets:
                return sets, f"duplicate counter set name {counter_set.name}"
            sets[counter_set.name] = {n: nanos(c.value) for n, c in (counter_set.counters or {}).items()}
    return sets, None


def _unknown_counter(counter_sets: CounterSets, slices: list[SliceInfo]) -> str | None:
    for info in slices:
        for device in info.devices:
            for set_name, counters in device.consumes:
                known = counter_sets.get(set_name)
                if known is None:
                    return f"counter set {set_name} not found"
                for counter, _ in counters:
                    if counter not in known:
                        return f"counter {counter} not found in counter set {set_name}"
    return None
