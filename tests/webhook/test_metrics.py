"""webhook.metrics: the CEL cache figures follow what the caches actually answered; the
certificate expiry follows the pair in use."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from pathlib import Path

from certs.reloader import CertReloader
from policies.api.kinds import decode_as
from policies.api.resource import Device, DeviceClass, ResourceClaim, ResourceSlice
from policies.cel import SelectorCache, compile_expression
from policies.snapshot import Snapshot
from policies.store import Store
from webhook.commands.serve import generate_pair
from webhook.metrics import DeviceCollector, Metrics
from webhook.state import FileState


def lookups(metrics: Metrics) -> dict[tuple[str, str], float]:
    text = metrics.render().decode()
    found = re.findall(r'draguard_cel_cache_lookups_total\{cache="(\w+)",result="(\w+)"\} (\S+)', text)
    return {(cache, result): float(value) for cache, result, value in found}


def test_cel_cache_lookups_and_hit_ratio_count_compiles_and_results() -> None:
    metrics = Metrics(FileState(Snapshot()))
    before = lookups(metrics)
    expression = f'device.driver == "{uuid.uuid4()}.example.com"'  # never compiled before
    program = compile_expression(expression)
    assert compile_expression(expression) is program
    cache = SelectorCache()
    binding = cache.bind("gpu.example.com", "p", Device(name=f"d-{uuid.uuid4()}"))
    assert cache.matches(program, binding) is False
    assert cache.matches(program, binding) is False
    after = lookups(metrics)
    delta = {key: after[key] - before.get(key, 0.0) for key in after}
    assert delta[("compile", "miss")] == 1 and delta[("compile", "hit")] == 1
    assert delta[("result", "miss")] == 1 and delta[("result", "hit")] == 1
    ratio = re.search(r'draguard_cel_cache_hit_ratio\{cache="compile"\} (\S+)', metrics.render().decode())
    assert ratio is not None and 0.0 < float(ratio.group(1)) <= 1.0


def expiry(metrics: Metrics) -> float | None:
    text = metrics.render().decode()
    found = re.search(r"^draguard_cert_expiry_timestamp_seconds (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def test_the_served_certificates_expiry_is_exported_once_one_is_served(tmp_path: Path) -> None:
    tls = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    metrics = Metrics(FileState(Snapshot()), tls)
    assert expiry(metrics) is None  # nothing served yet: no sample, rather than a made-up time
    generate_pair(str(tmp_path), None)
    assert tls.reload()
    served = tls.served
    assert served is not None
    assert expiry(metrics) == served.not_after.timestamp()
    assert served.not_after > dt.datetime.now(dt.UTC)


# --- device availability ------------------------------------------------------------------------------


class _Live:
    """A state whose snapshot the test replaces, as the live state's publisher does."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.synced = True

    def age(self) -> float:
        return 0.0


def _gauges(metrics: Metrics, name: str) -> dict[tuple[str, ...], float]:
    found = re.findall(rf"^{name}\{{(.*)\}} (\S+)$", metrics.render().decode(), re.M)
    return {tuple(re.findall(r'="([^"]*)"', labels)): float(value) for labels, value in found}


def _gpu_slice(node: str, gpus: int, tainted: int = 0) -> ResourceSlice:
    devices = [
        {"name": f"gpu-{i}", **({"taints": [{"key": "bad", "effect": "NoSchedule"}]} if i < tainted else {})}
        for i in range(gpus)
    ]
    spec = {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node, "resourceSliceCount": 1}}
    return decode_as(
        ResourceSlice, {"metadata": {"name": f"{node}-gpus"}, "spec": {**spec, "devices": devices}}
    )


def _claim(name: str, node: str, device: str) -> ResourceClaim:
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device}
    return decode_as(
        ResourceClaim,
        {
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [result]}}},
        },
    )


def test_pool_and_class_device_gauges_follow_the_snapshot_counting_only_what_changed() -> None:
    store = Store()
    gpus = {"metadata": {"name": "gpus"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    store.put(decode_as(DeviceClass, gpus))
    store.put(_gpu_slice("a", 4, tainted=1))
    store.put(_gpu_slice("b", 2))
    store.put(_claim("one", "a", "gpu-3"))
    live = _Live(store.snapshot())
    metrics = Metrics(live)
    pools = _gauges(metrics, "draguard_pool_devices")
    assert pools == {
        ("gpu.example.com", "a", "allocated"): 1,
        ("gpu.example.com", "a", "available"): 2,
        ("gpu.example.com", "a", "unavailable"): 1,
        ("gpu.example.com", "b", "allocated"): 0,
        ("gpu.example.com", "b", "available"): 2,
        ("gpu.example.com", "b", "unavailable"): 0,
    }
    assert _gauges(metrics, "draguard_class_devices") == {
        ("gpus", "allocated"): 1,
        ("gpus", "available"): 4,
        ("gpus", "unavailable"): 1,
    }
    collector = next(c for c in metrics.registry._collector_to_names if isinstance(c, DeviceCollector))
    before = collector.availability()
    assert collector.availability() is before  # the same snapshot is counted once
    store.put(_claim("two", "b", "gpu-0"))
    live.snapshot = store.snapshot()
    after = collector.availability()
    unchanged = {p.pool: p for p in before.pools}["a"]
    assert {p.pool: p for p in after.pools}["a"] is unchanged  # pool a was not counted again
    assert _gauges(metrics, "draguard_pool_devices")[("gpu.example.com", "b", "allocated")] == 1
    assert _gauges(metrics, "draguard_class_devices")[("gpus", "available")] == 3
