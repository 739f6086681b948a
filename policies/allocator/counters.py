"""Shared counters (DRAPartitionableDevices): what a pool has left, and what a search reserves.

Upstream 1.36: ``checkAvailableCounters`` in
``structured/internal/incubating/allocator_incubating.go`` (dra-reference 4.7, 4.16a). Upstream
adds a device's counters to what the search has reserved in the pool so far and then compares
*every* counter of the pool with what is left after the already-allocated devices. Here only the
counters the device consumes are compared, which gives the same answer (the check is
``Search._counters_refusal``), and what is left after the allocated devices is computed once per
pool and Allocator (see ``left_in``).
"""

from __future__ import annotations

from collections.abc import Set

from policies.allocator.devices import CounterSlot, CounterSlots
from policies.allocator.pools import CounterSets, Pool

# What the search has reserved per counter so far.
Reserved = dict[CounterSlot, int]


class PoolCounters:
    """The counters of one pool left after the cluster's allocated devices, in nano-units.

    ``sets`` by counter set and counter; ``limits`` the same by the counter slots devices consume
    (see ``devices.CounterSlot``), for the search. ``overdrawn``: the allocated devices already use
    more of some counter than the pool has. Then upstream's comparison of every counter fails for
    every device of the pool, whatever it consumes. Shared by every search of the Allocator: never
    modified after it is built.
    """

    __slots__ = ("limits", "overdrawn", "sets")

    def __init__(self, pool_name: str, sets: CounterSets) -> None:
        self.sets = sets
        self.limits = {
            (pool_name, set_name, counter): value
            for set_name, counters in sets.items()
            for counter, value in counters.items()
        }
        self.overdrawn = any(value < 0 for value in self.limits.values())


def left_in(pool: Pool, allocated: Set[tuple[str, str, str]]) -> PoolCounters:
    """The pool's counters minus what its ``allocated`` devices consume (counting the pool's slices
    for other nodes too), computed once per Pool and kept on it.

    A Pool belongs to one node's view of one Allocator, and ``allocated`` is that Allocator's
    allocated state: neither changes for the Allocator's lifetime, so nothing invalidates the value
    (a new snapshot gets a new Allocator, with new views and pools).
    """
    if pool.left is not None:
        return pool.left
    sets = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for info in (*pool.slices, *pool.other_slices):
        for device in info.devices:
            if not device.counter_slots or device.key not in allocated:
                continue
            for (_, set_name, counter), amount in device.counter_slots:
                left = sets.get(set_name)
                if left is not None and counter in left:
                    left[counter] -= amount
    pool.left = PoolCounters(pool.name, sets)
    return pool.left


def reserve(reserved: Reserved, slots: CounterSlots) -> None:
    for slot, amount in slots:
        reserved[slot] = reserved.get(slot, 0) + amount


def release(reserved: Reserved, slots: CounterSlots) -> None:
    for slot, amount in slots:
        reserved[slot] -= amount


def covers(left: CounterSets, consumed: CounterSets) -> bool:
    """Every counter of every set in the pool covers what is consumed (a negative one covers nothing)."""
    for set_name, counters in left.items():
        used = consumed.get(set_name)
        for counter, value in counters.items():
            if value < (used.get(counter, 0) if used else 0):
                return False
    return True
