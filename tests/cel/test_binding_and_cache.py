"""The device variable (dra-reference 3.1/3.2), the selector cache and the selector report."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from policies.api.quantity import Quantity
from policies.api.resource import Device, ResourceSlice
from policies.cel import (
    Environment,
    EvalError,
    SelectorCache,
    bind_device,
    compile_expression,
    selector_report,
)
from policies.cel.library import Semver


def _device(name: str = "gpu-0", **fields: Any) -> Device:
    return Device.model_validate({"name": name, **fields})


def _slice(generation: int | None, models: list[str], name: str = "s1") -> ResourceSlice:
    metadata: dict[str, Any] = {"name": name}
    if generation is not None:
        metadata["generation"] = generation
    return ResourceSlice.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "p", "resourceSliceCount": 1},
                "nodeName": "n",
                "devices": [
                    {"name": f"gpu-{i}", "attributes": {"model": {"string": m}}} for i, m in enumerate(models)
                ],
            },
        }
    )


def test_names_without_domain_use_the_driver() -> None:
    device = _device(attributes={"model": {"string": "a100"}, "ext.example.com/model": {"string": "x"}})
    binding = bind_device("gpu.example.com", device, pool="p")
    assert binding.attributes == {"gpu.example.com": {"model": "a100"}, "ext.example.com": {"model": "x"}}
    assert binding.device_id == "gpu.example.com/p/gpu-0"


@pytest.mark.parametrize("bare_last", [True, False])
def test_a_bare_and_a_qualified_name_for_one_entry_the_last_wins(bare_last: bool) -> None:
    """As the maps upstream builds (compile.go's DeviceMatches fills them in the slice's order)."""
    named = {"model": {"string": "bare"}, "gpu.example.com/model": {"string": "qualified"}}
    attributes = dict(reversed(named.items())) if bare_last else named
    binding = bind_device("gpu.example.com", _device(attributes=attributes))
    last = "bare" if bare_last else "qualified"
    assert binding.attributes == {"gpu.example.com": {"model": last}}
    assert compile_expression(f'device.attributes["gpu.example.com"].model == "{last}"').matches(binding)
    indexed = compile_expression(f'device.attributes["gpu.example.com"]["model"] == "{last}"')
    assert indexed.matches(binding)


def test_a_domain_with_a_slash_holds_nothing() -> None:
    """A name splits at its first "/": ``a/b/c`` is id ``b/c`` of domain ``a``, never id ``c`` of
    domain ``a/b``."""
    binding = bind_device("d", _device(attributes={"a/b/c": {"string": "x"}}))
    assert not compile_expression('has(device.attributes["a/b"].c)').matches(binding)
    assert compile_expression('device.attributes["a"]["b/c"] == "x"').matches(binding)


def test_a_binding_keeps_no_maps_of_its_own() -> None:
    """The selector rule and the allocator keep a binding per device of the cluster (40,000 at
    5,000 nodes): one that built its attribute and capacity maps kept about 650 bytes (issue 23)."""
    devices = [
        _device(
            f"gpu-{i}",
            attributes={
                "model": {"string": "a100"},
                "uuid": {"string": f"gpu-{i:08d}"},
                "index": {"int": i % 8},
                "driverVersion": {"version": "550.54.15"},
            },
            capacity={"memory": {"value": "80Gi"}},
        )
        for i in range(2000)
    ]
    program = compile_expression('device.attributes["gpu.example.com"].model == "a100"')
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        bindings = [bind_device("gpu.example.com", device, pool="p") for device in devices]
        assert all(program.matches(binding) for binding in bindings)
        kept = (tracemalloc.get_traced_memory()[0] - before) / len(bindings)
    finally:
        tracemalloc.stop()
    assert kept < 250, f"{kept:.0f} bytes kept per binding"


def test_values_convert_to_cel_types() -> None:
    device = _device(
        attributes={"v": {"version": "1.2.3-rc.1+b"}, "n": {"int": 3}, "ok": {"bool": False}},
        capacity={"memory": {"value": "40Gi"}},
    )
    binding = bind_device("d", device)
    assert binding.attributes["d"]["v"] == Semver(1, 2, 3, ("rc", 1))
    assert binding.attributes["d"]["n"] == 3 and binding.attributes["d"]["ok"] is False
    assert binding.capacity["d"]["memory"] == Quantity.parse("40Gi")
    assert binding.allow_multiple_allocations is False and binding.error is None


def test_list_attributes_need_the_gate() -> None:
    device = _device(attributes={"models": {"strings": ["a", "b"]}})
    assert bind_device("d", device).error == "attribute models: unsupported attribute value"
    enabled = bind_device("d", device, Environment(list_type_attributes=True))
    assert enabled.error is None and enabled.attributes["d"]["models"] == ["a", "b"]


def test_conversion_errors_surface_when_a_selector_runs() -> None:
    binding = bind_device("d", _device(attributes={"v": {"version": "1.2"}}), pool="p")
    assert binding.error is not None and binding.error.startswith("attribute v: parse semantic version: ")
    with pytest.raises(EvalError) as caught:
        compile_expression("true").matches(binding)
    assert caught.value.device == "d/p/gpu-0" and caught.value.message == binding.error


def test_cache_reuses_bindings_until_the_slice_generation_changes() -> None:
    cache = SelectorCache()
    first = _slice(1, ["a100", "h100"])
    bindings = cache.bind_slice(first)
    assert cache.bind_slice(_slice(1, ["changed", "changed"])) is bindings  # same generation: trusted
    renewed = cache.bind_slice(_slice(2, ["l4", "h100"]))
    assert renewed is not bindings and renewed[0].attributes["gpu.example.com"]["model"] == "l4"


def test_cache_without_generation_follows_the_object() -> None:
    cache = SelectorCache()
    first = _slice(None, ["a100"])
    assert cache.bind_slice(first) is cache.bind_slice(first)
    assert cache.bind_slice(_slice(None, ["a100"])) is not cache.bind_slice(first)
    device = _device()
    assert cache.bind("d", "p", device) is cache.bind("d", "p", device)
    assert cache.bind("d", "p", device, 3) is not cache.bind("d", "p", device, 4)


def test_cache_memoises_results_and_errors() -> None:
    cache = SelectorCache()
    binding = cache.bind_slice(_slice(1, ["a100"]))[0]
    model = compile_expression('device.attributes["gpu.example.com"].model == "a100"')
    missing = compile_expression('device.attributes["gpu.example.com"].numa == 0')
    assert cache.matches(model, binding) is True
    assert binding.results[(model.expression, model.env)] is True
    for _ in range(2):
        with pytest.raises(EvalError, match="no such key: numa"):
            cache.matches(missing, binding)


def test_results_depend_only_on_what_the_selector_reads() -> None:
    program = compile_expression('device.attributes["gpu.example.com"].flag == true')
    as_bool = bind_device("gpu.example.com", _device(attributes={"flag": {"bool": True}}))
    as_int = bind_device("gpu.example.com", _device(attributes={"flag": {"int": 1}}))
    assert program.matches(as_bool) is True
    assert program.matches(as_int) is False  # 1 is not true in CEL: the memo must tell them apart


def test_report_counts_errors_and_unknown_names() -> None:
    bindings = list(SelectorCache().bind_slice(_slice(1, ["a100", "h100", "a100"])))
    gpu = 'device.attributes["gpu.example.com"]'
    program = compile_expression(f'{gpu}.model == "a100" || {gpu}.?modle.hasValue()')
    report = selector_report(program, bindings)
    assert (report.total, report.matched, report.errors) == (3, 2, ())
    assert report.unknown_names == (("attribute", "gpu.example.com/modle"),)
    failing = selector_report(compile_expression('device.attributes["gpu.example.com"].numa == 0'), bindings)
    assert failing.matched == 0
    assert failing.errors == tuple((f"gpu.example.com/p/gpu-{i}", "no such key: numa") for i in range(3))


def test_names_read_follow_binds_and_guards() -> None:
    program = compile_expression(
        'cel.bind(g, device.attributes["gpu.example.com"], "numa" in g && has(g.model) && '
        'g.?mig.orValue(false)) && device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1Gi"))'
    )
    assert program.names_read() == (
        ("attribute", "gpu.example.com", "mig"),
        ("attribute", "gpu.example.com", "model"),
        ("attribute", "gpu.example.com", "numa"),
        ("capacity", "gpu.example.com", "memory"),
    )
