"""Rule selectors on a changing cluster: the inventory and outcomes it brings up to date from the
changed pools give the findings a fresh rule gives.

The rule keeps its device inventory per pool and each target's outcome as a sum over pools, and on a
new snapshot rebinds only the pools the store says changed (``Devices.changed``), then adjusts the
sums by counting. A seeded walk of slice changes applied through a :class:`policies.store.Store` as
the live state applies them (pools republished with a new generation, updated in place, added,
removed, emptied; devices without the attribute a selector reads, so that it fails on them) is
published snapshot by snapshot; after each, a rule that has seen every snapshot, and one that
skipped some, must answer exactly what a fresh SelectorsRule answers, for classes and claims with
several selectors (failing, matching none, matching each but not together, misspelled names,
firstAvailable, a missing class).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from rule_fixtures import admission, context

from policies.api.kinds import decode
from policies.rules.engine import Finding
from policies.rules.selectors import SelectorsRule
from policies.snapshot import Snapshot
from policies.store import Store

GPU, NIC = "gpu.example.com", "nic.example.com"
POOLS = {GPU: [f"node-{i}" for i in range(4)], NIC: ["rack-0", "rack-1"]}
MODEL = f"device.attributes['{GPU}'].model"
MEMORY = f"device.attributes['{GPU}'].memoryGB"
INDEX = f"device.attributes['{GPU}'].index"
DRA = "resource.k8s.io/v1"
STEPS = 150


def selectors(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in expressions]


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors(*expressions)},
    }


CLASSES = [
    device_class(GPU, f"device.driver == '{GPU}'"),
    device_class(NIC, f"device.driver == '{NIC}'"),
    device_class(
        "big-gpu", f"device.driver == '{GPU}'", f"{MEMORY} >= 40"
    ),  # fails where memoryGB is missing
]


def exactly(name: str, device_class: str, *expressions: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "selectors": selectors(*expressions)}}


CLAIMS = [
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "trainer-gpu", "namespace": "gpu-test1"},
        "spec": {
            "devices": {
                "requests": [
                    exactly("fast", GPU, f"{MODEL} == 'a100'", f"{MEMORY} > 40"),
                    exactly("pair", GPU, f"{INDEX} == 0", f"{INDEX} == 1"),  # each matches, never together
                    exactly("none", GPU, f"{MODEL} == 'z900'", f"{MODEL}.startsWith('a')"),
                    {
                        "name": "net",
                        "firstAvailable": [
                            {
                                "name": "nic",
                                "deviceClassName": NIC,
                                "selectors": selectors(f"device.attributes['{NIC}'].sped > 10"),  # misspelled
                            },
                            {"name": "big", "deviceClassName": "big-gpu", "selectors": selectors("true")},
                        ],
                    },
                    exactly("gone", "no-such-class", f"{MODEL} == 'a100'"),
                ]
            }
        },
    },
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "gpu-test1"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        exactly("gpu", "big-gpu", f"{MODEL} == 'h100' || {MEMORY} < 80", f"{INDEX} >= 1"),
                    ]
                }
            }
        },
    },
    device_class("new-class", f"device.driver == '{GPU}'", f"device.attributes['{GPU}'].modle == 'a100'"),
]


def gpu(rng: random.Random, slice_name: str, i: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "model": {"string": rng.choice(["a100", "h100"])},
        "index": {"int": i},
    }
    if rng.random() < 0.7:  # the others lack memoryGB: a selector reading it fails on them
        attributes["memoryGB"] = {"int": rng.choice([40, 80])}
    return {"name": f"{slice_name}-gpu-{i}", "attributes": attributes}


def nic(rng: random.Random, slice_name: str, i: int) -> dict[str, Any]:
    return {"name": f"{slice_name}-nic-{i}", "attributes": {"speed": {"int": rng.choice([10, 100])}}}


def resource_slice(rng: random.Random, driver: str, pool: str, index: int, generation: int) -> dict[str, Any]:
    name = f"{pool}-{driver.split('.')[0]}-{index}"
    make = gpu if driver == GPU else nic
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": 2},
        # A NIC pool is sometimes empty (its driver publishes a slice with no devices).
        "devices": [
            make(rng, name, i) for i in range(rng.choice([0, 1, 2, 3] if driver == NIC else [1, 2, 3]))
        ],
    }
    if driver == GPU:
        spec["nodeName"] = pool
    else:
        spec["allNodes"] = True
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


class Walk:
    """Slices changed through a store, as the live state changes them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.store = Store()
        self.generations: dict[tuple[str, str], int] = {}
        self.slices: dict[tuple[str, str], set[str]] = {}
        for raw in CLASSES:
            self.store.put(decode(raw))
        for driver, pools in POOLS.items():
            for pool in pools[:2]:
                self.publish_pool(driver, pool)

    def publish_pool(self, driver: str, pool: str) -> None:
        """A new generation of the pool: its slices written again, the older ones left behind
        until deleted (the driver deletes them after)."""
        key = (driver, pool)
        generation = self.generations[key] = self.generations.get(key, 0) + 1
        for index in range(self.rng.choice([1, 2])):
            raw = resource_slice(self.rng, driver, pool, index, generation)
            self.store.put(decode(raw))
            self.slices.setdefault(key, set()).add(raw["metadata"]["name"])

    def remove_pool(self, driver: str, pool: str) -> None:
        for name in self.slices.pop((driver, pool), set()):
            self.store.delete("ResourceSlice", ("", name))

    def update_in_place(self, driver: str, pool: str) -> None:
        key = (driver, pool)
        if key in self.generations:
            raw = resource_slice(self.rng, driver, pool, 0, self.generations[key])
            self.store.put(decode(raw))
            self.slices.setdefault(key, set()).add(raw["metadata"]["name"])

    def step(self) -> None:
        rng = self.rng
        for _ in range(rng.choice([1, 1, 2, 3])):  # several changes between two publishes at times
            driver = rng.choice([GPU, GPU, NIC])
            pool = rng.choice(POOLS[driver])
            action = rng.random()
            if action < 0.4:
                self.publish_pool(driver, pool)
            elif action < 0.6:
                self.update_in_place(driver, pool)
            elif action < 0.8:
                self.remove_pool(driver, pool)
            else:  # removed and published again before the next publish
                self.remove_pool(driver, pool)
                self.publish_pool(driver, pool)


REQUESTS = [admission(raw) for raw in CLAIMS] + [admission(raw) for raw in CLASSES]


def findings(rule: SelectorsRule, snapshot: Snapshot) -> list[list[Finding]]:
    ctx = context(snapshot)
    return [list(rule.check(request, ctx)) for request in REQUESTS]


@pytest.mark.parametrize("seed", [1, 23, 5517])
def test_a_rule_kept_up_to_date_pool_by_pool_answers_as_a_fresh_one(seed: int) -> None:
    walk = Walk(seed)
    every, some = SelectorsRule(), SelectorsRule()
    seen_errors = seen_none = 0
    for step in range(STEPS):
        walk.step()
        snapshot = walk.store.snapshot()
        fresh = findings(SelectorsRule(), snapshot)
        assert findings(every, snapshot) == fresh, step
        if step % 3 == 0:  # one that missed snapshots rebuilds from the pools' maps
            assert findings(some, snapshot) == fresh, step
        messages = [f.message for found in fresh for f in found]
        seen_errors += any("fails on" in m for m in messages)
        seen_none += any("match none of the" in m and "together" in m for m in messages)
    # The walk reached what it is meant to check: counting updates, failing selectors, pairs.
    assert seen_errors > STEPS // 4 and seen_none > STEPS // 4


def test_a_pool_removed_and_published_again_between_two_snapshots_is_listed_where_a_fresh_rule_lists_it() -> (
    None
):
    """Both GPU pools have a device a selector fails on; node-0 is removed and published again
    before the next snapshot (a driver restarting), which the store then holds after node-1."""
    store = Store()
    for raw in CLASSES:
        store.put(decode(raw))

    def publish(pool: str, generation: int) -> None:
        raw = resource_slice(random.Random(0), GPU, pool, 0, generation)
        raw["spec"]["devices"] = [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]
        store.put(decode(raw))

    publish("node-0", 1)
    publish("node-1", 1)
    big_gpu = admission(CLASSES[2])
    rule = SelectorsRule()
    rule.check(big_gpu, context(store.snapshot()))
    store.delete("ResourceSlice", ("", "node-0-gpu-0"))
    publish("node-0", 2)
    snapshot = store.snapshot()
    assert [pool for pool, _ in snapshot.devices.group_items()] == [(GPU, "node-1"), (GPU, "node-0")]
    fresh = list(SelectorsRule().check(big_gpu, context(snapshot)))
    assert any("fails on 2 of the 2 devices" in f.message for f in fresh)
    assert list(rule.check(big_gpu, context(snapshot))) == fresh


def test_a_driver_whose_pools_lost_every_device_is_named_alike_by_every_rule() -> None:
    """The NIC driver's pools are published again with no devices: a rule that saw them before, a
    fresh rule on the live state's snapshot and a fresh rule on Snapshot.build of the same objects
    (the offline commands) must say the same of a selector reading a NIC attribute."""
    walk = Walk(11)
    claim = admission(CLAIMS[0])
    rule = SelectorsRule()
    rule.check(claim, context(walk.store.snapshot()))
    for pool in POOLS[NIC]:
        walk.remove_pool(NIC, pool)
        key = (NIC, pool)
        generation = walk.generations[key] = walk.generations.get(key, 0) + 1
        empty = resource_slice(walk.rng, NIC, pool, 0, generation)
        empty["spec"]["devices"] = []
        walk.store.put(decode(empty))
    snapshot = walk.store.snapshot()
    built = Snapshot.build([*snapshot.classes.values(), *snapshot.slices])
    fresh = list(SelectorsRule().check(claim, context(snapshot)))
    offline = list(SelectorsRule().check(claim, context(built)))
    seen = list(rule.check(claim, context(snapshot)))
    named = [f.message for f in fresh if "sped" in f.message]
    assert named  # the misspelled NIC attribute is reported
    assert seen == fresh
    assert offline == fresh


def test_a_pool_changed_in_one_slice_keeps_the_bindings_and_results_of_the_others() -> None:
    """The rule takes a device's binding (and the selector results in it) over from the pool as it
    was while the Device is the same object, and binds the changed slice's devices afresh."""
    rng = random.Random(5)
    store = Store()
    for raw in CLASSES:
        store.put(decode(raw))
    first, second = (resource_slice(rng, GPU, "node-0", i, 1) for i in (0, 1))
    for raw in (first, second):
        store.put(decode(raw))
    rule = SelectorsRule()
    before = findings(rule, store.snapshot())
    pool = (GPU, "node-0")

    def bindings() -> dict[str, Any]:
        assert rule._inventory is not None
        return {b.name: b for b in rule._inventory[1].pools[pool].devices}

    old = bindings()
    assert all(b.results for b in old.values())  # the classes' selectors ran on every device
    changed = resource_slice(random.Random(6), GPU, "node-0", 1, 1)  # the second slice, updated in place
    store.put(decode(changed))
    snapshot = store.snapshot()
    assert findings(rule, snapshot) == findings(SelectorsRule(), snapshot)
    new = bindings()
    kept = {d["name"] for d in first["spec"]["devices"]}
    assert {name for name in new if new[name] is old.get(name)} == kept
    assert before  # the first answers were given on the pool before the change
