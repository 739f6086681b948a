"""webhook.metrics: the CEL cache figures follow what the caches actually answered; the
certificate expiry follows the pair in use."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from pathlib import Path

from certs.reloader import CertReloader
from policies.api.resource import Device
from policies.cel import SelectorCache, compile_expression
from policies.snapshot import Snapshot
from webhook.commands.serve import generate_pair
from webhook.metrics import Metrics
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
