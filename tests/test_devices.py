"""``draguard devices`` against counts this test works out itself from the API objects.

Seeded random clusters in the shapes the public DRA drivers publish (whole GPUs per node, a
partitionable GPU's pool with its counters in a slice of their own, shareable devices with
consumable capacity, a network pool without a node), with what makes counting hard: pools with a
slice missing, older generations left behind, taints on devices and from DeviceTaintRules,
allocations with admin access, shares, and devices a claim names that the pool no longer has.
The expected counts come from plain loops over the objects as written (KEP-5677's meanings, see
``policies/availability/pools.py``), never from draguard's code; the classes select by driver and
attribute, which the test checks by reading the attributes.
"""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import clustergen
from policies.api.quantity import Quantity
from webhook import cli

V1 = "resource.k8s.io/v1"
DRIVERS = ("gpu.example.com", "nic.example.com")
MODELS = ("a100", "h100")
ZONE = "topology.kubernetes.io/zone"


def _obj(kind: str, name: str, spec: dict[str, Any], api: str = V1, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, **meta}, "spec": spec}


def _device(rng: random.Random, name: str, driver: str) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": {"model": {"string": rng.choice(MODELS)}}}
    if rng.random() < 0.15:
        effect = rng.choice(["NoSchedule", "NoExecute", "None"])
        device["taints"] = [{"key": "example.com/unhealthy", "effect": effect}]
    if driver == "nic.example.com" and rng.random() < 0.5:
        device["allowMultipleAllocations"] = True
        device["capacity"] = {"bandwidth": {"value": "100G"}}
    return device


def _pool_slices(rng: random.Random, driver: str, pool: str, node: str | None) -> list[dict[str, Any]]:
    """One pool: 1-3 slices of the newest generation (one missing at times), sometimes an older
    generation's slice left behind, sometimes a partitionable GPU with a counter slice."""
    generation = rng.randint(1, 3)
    partitioned = driver == "gpu.example.com" and rng.random() < 0.3
    count = 2 if partitioned else rng.randint(1, 3)
    where: dict[str, Any] = {"nodeName": node} if node else {"allNodes": True}
    pool_ref = {"name": pool, "generation": generation, "resourceSliceCount": count}
    slices = []
    if partitioned:
        counters = [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]
        slices.append(
            _obj(
                "ResourceSlice",
                f"{pool}-counters",
                {"driver": driver, **where, "pool": pool_ref, "sharedCounters": counters},
            )
        )
        devices = [
            {
                **_device(rng, f"part-{i}", driver),
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": str(size)}}}],
            }
            for i, size in enumerate((8, 4, 4, 2, 2))
        ]
        slices.append(
            _obj(
                "ResourceSlice",
                f"{pool}-parts",
                {"driver": driver, **where, "pool": pool_ref, "devices": devices},
            )
        )
    else:
        for s in range(count):
            devices = [_device(rng, f"dev-{s}-{d}", driver) for d in range(rng.randint(0, 4))]
            slices.append(
                _obj(
                    "ResourceSlice",
                    f"{pool}-{s}",
                    {"driver": driver, **where, "pool": pool_ref, "devices": devices},
                )
            )
    if len(slices) > 1 and rng.random() < 0.15:
        slices.pop()  # incomplete
    if generation > 1 and rng.random() < 0.3:
        old = json.loads(json.dumps(slices[0]))
        old["metadata"]["name"] += "-old"
        old["spec"]["pool"]["generation"] = generation - 1
        slices.append(old)
    return slices


def _claims(rng: random.Random, slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Allocated claims over some devices: exclusive, admin access, shares with consumed capacity,
    and now and then a device the pool does not publish (anymore)."""
    devices = [
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d)
        for s in slices
        for d in s["spec"].get("devices", [])
    ]
    claims = []
    for i in range(len(devices) // 2):
        driver, pool, device = rng.choice(devices)
        result: dict[str, Any] = {"request": "r", "driver": driver, "pool": pool, "device": device["name"]}
        if rng.random() < 0.05:
            result["device"] = "gone"
        if rng.random() < 0.1:
            result["adminAccess"] = True
        if device.get("allowMultipleAllocations"):
            result["shareID"] = f"0000000{i % 10}-0000-4000-8000-000000000000"
            result["consumedCapacity"] = {"bandwidth": rng.choice(["10G", "25G"])}
        status = {"allocation": {"devices": {"results": [result]}}}
        claim = _obj("ResourceClaim", f"claim-{i}", {"devices": {"requests": []}}, namespace="team")
        claims.append({**claim, "status": status})
    return claims


def generated(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}]
    slices: list[dict[str, Any]] = []
    for n in range(rng.randint(4, 12)):
        node = f"node-{n}"
        labels = {"kubernetes.io/hostname": node, ZONE: f"zone-{'ab'[n % 2]}"}
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}})
        for driver in DRIVERS:
            if rng.random() < 0.8:
                slices += _pool_slices(rng, driver, f"{node}-{driver.split('.')[0]}", node)
    slices += _pool_slices(rng, "nic.example.com", "fabric", None)
    objects += slices + _claims(rng, slices)
    for driver in DRIVERS:
        selector = {"cel": {"expression": f'device.driver == "{driver}"'}}
        objects.append(_obj("DeviceClass", driver, {"selectors": [selector]}))
    model = {
        "cel": {
            "expression": 'device.driver == "gpu.example.com" && '
            'device.attributes["gpu.example.com"].model == "a100"'
        }
    }
    objects.append(_obj("DeviceClass", "a100", {"selectors": [model]}))
    rules = [
        {
            "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
            "deviceSelector": {"pool": "node-1-gpu"},
        },
        {
            "taint": {"key": "example.com/broken", "effect": "NoExecute"},
            "deviceSelector": {"device": "dev-0-1"},
        },
        {"taint": {"key": "example.com/info", "effect": "None"}, "deviceSelector": {}},
    ]
    objects += [
        _obj("DeviceTaintRule", f"rule-{i}", r, "resource.k8s.io/v1beta2") for i, r in enumerate(rules)
    ]
    return objects


# --- the test's own counts -------------------------------------------------------------------------


def _q(text: str) -> Fraction:
    return Quantity.parse(text).as_fraction()


def _selected(rule: dict[str, Any], driver: str, pool: str, device: str) -> bool:
    selector = rule["spec"].get("deviceSelector")
    if selector is None:
        return False
    wanted = {"driver": driver, "pool": pool, "device": device}
    return all(selector.get(k) in (None, v) for k, v in wanted.items())


def _effect(objects: list[dict[str, Any]], driver: str, pool: str, device: dict[str, Any]) -> str | None:
    effects = {t["effect"] for t in device.get("taints", [])}
    effects |= {
        r["spec"]["taint"]["effect"]
        for r in objects
        if r["kind"] == "DeviceTaintRule" and _selected(r, driver, pool, device["name"])
    }
    return "NoExecute" if "NoExecute" in effects else "NoSchedule" if "NoSchedule" in effects else None


def expected(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per pool: None for an incomplete one, else the counts, counters and shareable summary."""
    newest: dict[tuple[str, str], int] = {}
    for s in (o for o in objects if o["kind"] == "ResourceSlice"):
        key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), s["spec"]["pool"]["generation"])
    in_use: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for claim in (o for o in objects if o["kind"] == "ResourceClaim"):
        for r in claim["status"]["allocation"]["devices"]["results"]:
            if not r.get("adminAccess"):
                in_use.setdefault((r["driver"], r["pool"], r["device"]), []).append(r)
    pools: dict[tuple[str, str], dict[str, Any]] = {}
    for key, generation in newest.items():
        members = [
            s
            for s in objects
            if s["kind"] == "ResourceSlice"
            and (s["spec"]["driver"], s["spec"]["pool"]["name"]) == key
            and s["spec"]["pool"]["generation"] == generation
        ]
        if len(members) < members[0]["spec"]["pool"]["resourceSliceCount"]:
            pools[key] = {"incomplete": True}
            continue
        devices = [d for s in members for d in s["spec"].get("devices", [])]
        states = []
        for d in devices:
            used = (*key, d["name"]) in in_use
            states.append((used, _effect(objects, *key, d), d))
        counters: dict[str, dict[str, Fraction]] = {}
        for s in members:
            for cs in s["spec"].get("sharedCounters", []):
                counters[cs["name"]] = {n: _q(c["value"]) for n, c in cs["counters"].items()}
        consumed: dict[str, dict[str, Fraction]] = {
            n: dict.fromkeys(c, Fraction(0)) for n, c in counters.items()
        }
        for used, _, d in states:
            for use in d.get("consumesCounters", []) if used else []:
                for n, c in use["counters"].items():
                    consumed[use["counterSet"]][n] += _q(c["value"])
        shareable = [d for d in devices if d.get("allowMultipleAllocations")]
        results = [r for d in devices for r in in_use.get((*key, d["name"]), [])]
        pools[key] = {
            "total": len(devices),
            "allocated": sum(1 for used, _, _ in states if used),
            "unavailable": sum(1 for used, effect, _ in states if effect and not used),
            "noSchedule": sum(1 for _, effect, _ in states if effect == "NoSchedule"),
            "noExecute": sum(1 for _, effect, _ in states if effect == "NoExecute"),
            "counters": {
                (n, c): (cap, consumed[n][c], max(cap - consumed[n][c], Fraction(0)))
                for n, cs in counters.items()
                for c, cap in cs.items()
            },
            "shareable": None
            if not shareable
            else {
                "partially": sum(1 for d in shareable if (*key, d["name"]) in in_use),
                "fully": sum(1 for d in shareable if (*key, d["name"]) not in in_use),
                "shares": sum(1 for r in results if "shareID" in r),
                "consumed": sum(
                    (_q(r["consumedCapacity"]["bandwidth"]) for r in results if "consumedCapacity" in r),
                    Fraction(0),
                ),
                "total": sum((_q(d["capacity"]["bandwidth"]["value"]) for d in shareable), Fraction(0)),
            },
            "devices": [(d, used, effect) for used, effect, d in states],
        }
    return pools


def _admits(class_name: str, driver: str, device: dict[str, Any]) -> bool:
    if class_name == "a100":
        return driver == "gpu.example.com" and device["attributes"]["model"]["string"] == "a100"
    return driver == class_name


def expected_classes(
    objects: list[dict[str, Any]], pools: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Counter[str]]:
    zones = {o["metadata"]["name"]: o["metadata"]["labels"][ZONE] for o in objects if o["kind"] == "Node"}
    node_of = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"]): s["spec"].get("nodeName")
        for s in objects
        if s["kind"] == "ResourceSlice"
    }
    found: dict[str, Counter[str]] = {}
    for name in (o["metadata"]["name"] for o in objects if o["kind"] == "DeviceClass"):
        counts: Counter[str] = Counter()
        for key, pool in pools.items():
            if pool.get("incomplete"):
                continue
            for device, used, effect in pool["devices"]:
                if not _admits(name, key[0], device):
                    continue
                state = "allocated" if used else "unavailable" if effect else "available"
                counts[state] += 1
                if node_of[key]:
                    counts[f"{zones[node_of[key]]}/{state}"] += 1
        found[name] = counts
    return found


# --- the comparison --------------------------------------------------------------------------------


def devices(path: Path, *args: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["devices", "-f", str(path), "-o", "json", *args])
    assert code == 0, err.getvalue()
    found: dict[str, Any] = json.loads(out.getvalue())
    return found


@pytest.mark.parametrize("seed", range(12))
def test_counts_equal_the_tests_own_on_generated_clusters(seed: int, tmp_path: Path) -> None:
    objects = generated(seed)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    answer = devices(path, "--api-versions", "resource.k8s.io/v1beta2")
    assert answer["apiVersion"] == "draguard.io/v1alpha1" and answer["kind"] == "DeviceAvailability"
    pools = expected(objects)
    assert [(p["driver"], p["poolName"]) for p in answer["pools"]] == sorted(pools)
    for pool in answer["pools"]:
        want = pools[(pool["driver"], pool["poolName"])]
        if want.get("incomplete"):
            assert pool["validationError"].startswith("PoolIncomplete: ") and "devices" not in pool
            continue
        counts = pool["devices"]
        assert (counts["totalDevices"], counts["allocatedDevices"], counts["unavailableDevices"]) == (
            want["total"],
            want["allocated"],
            want["unavailable"],
        ), pool
        assert counts["availableDevices"] == want["total"] - want["allocated"] - want["unavailable"]
        assert counts["taintedDevices"] == {"noSchedule": want["noSchedule"], "noExecute": want["noExecute"]}
        got = {
            (s["name"], n): (_q(c["capacity"]), _q(c["consumed"]), _q(c["available"]))
            for s in pool["counterSets"]
            for n, c in s["counters"].items()
        }
        assert got == want["counters"]
        shared = pool.get("shareableSummary")
        if want["shareable"] is None:
            assert shared is None
        else:
            (capacity,) = shared["capacity"]
            assert (
                shared["fullyAvailableDevices"],
                shared["partiallyAvailableDevices"],
                shared["shares"],
            ) == (want["shareable"]["fully"], want["shareable"]["partially"], want["shareable"]["shares"])
            assert (_q(capacity["total"]), _q(capacity["consumed"])) == (
                want["shareable"]["total"],
                want["shareable"]["consumed"],
            )
    classes = expected_classes(objects, pools)
    for device_class in answer["classes"]:
        want_class = classes[device_class["name"]]
        counts = device_class["devices"]
        assert (counts["allocatedDevices"], counts["availableDevices"], counts["unavailableDevices"]) == (
            want_class["allocated"],
            want_class["available"],
            want_class["unavailable"],
        ), device_class["name"]
        for zone in device_class["zones"]:
            z = zone["zone"]
            assert zone["devices"]["availableDevices"] == want_class[f"{z}/available"]
            assert zone["devices"]["allocatedDevices"] == want_class[f"{z}/allocated"]


def test_the_benchmarks_gpu_fleet_counts_as_its_generator_wrote_it(tmp_path: Path) -> None:
    """benchmarks/clustergen's cluster, scaled down: every claim holds one GPU of its node."""
    sizes = clustergen.Sizes.scaled(0.01)
    written = clustergen.write(str(tmp_path / "fleet"), sizes)
    claims = json.loads(Path(written.files["resourceclaims"]).read_text())["items"]
    held = Counter(c["status"]["allocation"]["devices"]["results"][0]["pool"] for c in claims)
    answer = devices(tmp_path / "fleet")
    assert answer["poolCount"] == sizes.nodes
    for pool in answer["pools"]:
        assert pool["devices"]["totalDevices"] == sizes.gpus
        assert pool["devices"]["allocatedDevices"] == held[pool["poolName"]]
    (gpus,) = answer["classes"]
    assert gpus["devices"]["allocatedDevices"] == len(claims)
    assert gpus["devices"]["availableDevices"] == sizes.nodes * sizes.gpus - len(claims)


def test_filters_and_unknown_names(tmp_path: Path) -> None:
    objects = generated(1)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    flags = ("--api-versions", "resource.k8s.io/v1beta2")
    everything = devices(path, *flags)
    by_node = devices(path, *flags, "--node", "node-1")
    assert by_node["pools"] and all(p["nodeName"] == "node-1" for p in by_node["pools"])
    assert by_node["poolCount"] == sum(p.get("nodeName") == "node-1" for p in everything["pools"])
    by_class = devices(path, *flags, "--class", "nic.example.com")
    assert [c["name"] for c in by_class["classes"]] == ["nic.example.com"]
    assert {p["driver"] for p in by_class["pools"]} == {"nic.example.com"}
    by_driver = devices(path, *flags, "--driver", "gpu.example.com", "--pool", "node-0-gpu")
    assert [p["poolName"] for p in by_driver["pools"]] == ["node-0-gpu"]
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert cli.main(["devices", "-f", str(path), *flags, "--class", "a10"]) == 2
    assert (
        "--class a10: no such DeviceClass (classes: a100, gpu.example.com, nic.example.com)" in err.getvalue()
    )
