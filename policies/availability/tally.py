"""Device availability of a whole snapshot: every pool, and every DeviceClass over the devices it admits.

:class:`Tally` computes it and keeps what it computed, so that the next snapshot costs what changed
(``serve``'s metrics ask on every scrape): a pool is counted again only when its slices, the devices
its claims use or the taint rules changed (slices by identity: the store gives an unchanged pool the
same objects), a class's selectors are evaluated again on a pool only when the class or the pool's
slices changed, and the devices a namespace's claims use are collected again only when its claims
changed (the snapshot keeps an unchanged namespace's claims in the same map). Pure: the caller
keeps one Tally per state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policies.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from policies.availability.classes import Admitted, ClassSelectors
from policies.availability.pools import (
    Counts,
    DeviceUse,
    PoolKey,
    PoolStatus,
    Uses,
    add_uses,
    newest_slices,
    pool_status,
)
from policies.cel import Environment, SelectorCache
from policies.snapshot import Key, Snapshot

ZONE_LABEL = "topology.kubernetes.io/zone"
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ClassStatus:
    """One DeviceClass: its devices' counts over complete pools, per zone (of the pools' nodes), and
    what its selectors could not decide."""

    name: str
    counts: Counts
    zones: tuple[tuple[str, Counts], ...]
    pools: int
    error: str | None = None
    failures: int = 0
    failure: str | None = None


@dataclass(frozen=True)
class Availability:
    """Every pool sorted by driver and name, every class by name, and each pool's zone."""

    pools: tuple[PoolStatus, ...]
    classes: tuple[ClassStatus, ...]
    zones: Mapping[PoolKey, str]
    admitted: Mapping[str, Mapping[PoolKey, frozenset[int]]]

    def class_pools(self, name: str) -> Mapping[PoolKey, frozenset[int]]:
        """The pools with devices the class admits, and those devices' positions."""
        return self.admitted.get(name, {})


@dataclass
class _Pool:
    """One pool's last computed status and what it was computed from."""

    slices: list[ResourceSlice]
    uses: Uses
    rules: tuple[object, ...]
    status: PoolStatus
    admitted: dict[str, tuple[DeviceClass, Admitted]] = field(default_factory=dict)
    counts: dict[str, tuple[DeviceClass, Counts]] = field(default_factory=dict)

    def still(self, slices: list[ResourceSlice], uses: Uses, rules: tuple[object, ...]) -> bool:
        return _same(slices, self.slices) and rules is self.rules and uses == self.uses


def _same(a: Sequence[ResourceSlice], b: Sequence[ResourceSlice]) -> bool:
    """The same slice objects (an unchanged pool's, as the store keeps them)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Tally:
    """Counts snapshots one after another, reusing what did not change (see the module docstring)."""

    def __init__(self, cel_cache: SelectorCache | None = None) -> None:
        self._cel = cel_cache or SelectorCache(Environment("stored"))
        self._pools: dict[PoolKey, _Pool] = {}
        self._namespaces: dict[
            str, tuple[Mapping[Key, ResourceClaim], dict[PoolKey, dict[str, DeviceUse]]]
        ] = {}
        self._selectors: dict[str, ClassSelectors] = {}

    def of(self, snapshot: Snapshot, progress: Progress | None = None) -> Availability:
        uses = self._uses(snapshot.claims.group_items())
        rules = snapshot.taint_rules
        slices = newest_slices(snapshot.slices)
        classes = [self._class(c) for c in snapshot.classes.values()]
        pools: dict[PoolKey, _Pool] = {}
        for done, (key, members) in enumerate(slices.items()):
            found = self._pools.get(key)
            used = uses.get(key, {})
            if found is None or not found.still(members, used, rules):
                status = pool_status(key, members, used, rules)
                kept = found.admitted if found is not None and _same(found.slices, members) else {}
                found = _Pool(members, used, rules, status, kept)
            pools[key] = found
            if progress is not None:
                progress(done + 1, len(slices))
        self._pools = pools
        zones = {key: zone for key, p in pools.items() if (zone := _zone(snapshot, p.status.node))}
        admitted = {s.device_class.name: _admitted(s, pools) for s in classes}
        return Availability(
            pools=tuple(pools[k].status for k in sorted(pools)),
            classes=tuple(sorted((_class_status(s, pools, zones) for s in classes), key=lambda c: c.name)),
            zones=zones,
            admitted=admitted,
        )

    def _class(self, device_class: DeviceClass) -> ClassSelectors:
        found = self._selectors.get(device_class.name)
        if found is None or found.device_class is not device_class:
            found = self._selectors[device_class.name] = ClassSelectors(device_class, self._cel)
        return found

    def _uses(
        self, namespaces: Iterable[tuple[str, Mapping[Key, ResourceClaim]]]
    ) -> dict[PoolKey, dict[str, DeviceUse]]:
        """The devices in use per pool, each namespace's part collected once per change of it."""
        merged: dict[PoolKey, dict[str, DeviceUse]] = {}
        kept = {}
        for namespace, claims in namespaces:
            found = self._namespaces.get(namespace)
            if found is None or found[0] is not claims:
                part: dict[PoolKey, dict[str, DeviceUse]] = {}
                add_uses(part, claims.values())
                found = (claims, part)
            kept[namespace] = found
            for pool, devices in found[1].items():
                into = merged.setdefault(pool, {})
                for device, use in devices.items():
                    before = into.get(device)
                    into[device] = use if before is None else before.plus_use(use)
        self._namespaces = kept
        return merged


def _zone(snapshot: Snapshot, node: str | None) -> str | None:
    found = snapshot.nodes.get(node) if node else None
    return found.labels.get(ZONE_LABEL) if found is not None else None


def _admitted(selectors: ClassSelectors, pools: Mapping[PoolKey, _Pool]) -> dict[PoolKey, frozenset[int]]:
    """Per complete pool with devices the class admits, their positions (evaluated once per pool)."""
    name = selectors.device_class.name
    found: dict[PoolKey, frozenset[int]] = {}
    for key, pool in pools.items():
        if pool.status.counts is None:
            continue
        cached = pool.admitted.get(name)
        if cached is None or cached[0] is not selectors.device_class:
            cached = pool.admitted[name] = (selectors.device_class, selectors.admitted(pool.slices))
        if cached[1].positions:
            found[key] = cached[1].positions
    return found


def _class_status(
    selectors: ClassSelectors, pools: Mapping[PoolKey, _Pool], zones: Mapping[PoolKey, str]
) -> ClassStatus:
    name = selectors.device_class.name
    total = Counts()
    by_zone: dict[str, Counts] = {}
    count = failures = 0
    failure = None
    for key, pool in pools.items():
        admitted = pool.admitted.get(name)
        if admitted is None or pool.status.counts is None:
            continue
        failures += admitted[1].failures
        failure = failure or admitted[1].failure
        if not admitted[1].positions:
            continue
        counts = _counts(pool, name, selectors.device_class, admitted[1])
        count += 1
        total += counts
        zone = zones.get(key)
        if zone is not None:
            by_zone[zone] = by_zone.get(zone, Counts()) + counts
    return ClassStatus(name, total, tuple(sorted(by_zone.items())), count, selectors.error, failures, failure)


def _counts(pool: _Pool, name: str, device_class: DeviceClass, admitted: Admitted) -> Counts:
    """The counts of the pool's devices the class admits, kept with the pool's status."""
    cached = pool.counts.get(name)
    if cached is None or cached[0] is not device_class:
        devices = pool.status.devices
        counts = Counts.of(devices[i] for i in sorted(admitted.positions))
        cached = pool.counts[name] = (device_class, counts)
    return cached[1]
