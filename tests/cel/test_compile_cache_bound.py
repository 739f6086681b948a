"""Compiled programs are held within a budget of expression source, by the compile cache and by
the results each device binding keeps: long selectors (10 KiB each, 0.6 MB compiled) sent anew by
a client would otherwise hold gigabytes (issue 16)."""

import gc
import weakref

import pytest

from policies.api.resource import Device
from policies.cel import Environment, Program, SelectorCache, bind_device, cache, compile_expression, program
from policies.cel.program import front_end
from policies.cel.stats import RESULTS


def test_long_expressions_evict_the_oldest_past_the_length_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(program, "_CACHE", type(program._CACHE)())
    monkeypatch.setattr(program, "_cached_chars", 0)
    monkeypatch.setattr(program, "_CACHE_CHARS", 3000)
    expressions = [" || ".join(f"device.driver == 'd{i}-{j}'" for j in range(40)) for i in range(4)]
    assert all(1000 < len(e) < 1500 for e in expressions)
    compiled = [compile_expression(e) for e in expressions]
    assert [key[0] for key in program._CACHE] == expressions[2:]
    assert program._cached_chars == sum(map(len, expressions[2:])) <= 3000
    assert compile_expression(expressions[3]) is compiled[3]  # still cached
    assert compile_expression(expressions[0]) is not compiled[0]  # compiled again


def test_a_bindings_results_do_not_keep_evicted_programs_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "RESULTS_CHARS", 3000)
    selectors = SelectorCache()
    binding = bind_device("gpu.example.com", Device.model_validate({"name": "gpu-0"}))
    programs = [
        compile_expression(" || ".join(f"device.driver == 'd{i}-{j}'" for j in range(40))) for i in range(5)
    ]
    assert all(selectors.matches(p, binding) is False for p in programs)
    assert binding.results_chars <= 3000 + len(programs[0].expression)
    assert list(binding.results) == [(p.expression, p.env) for p in programs[3:]]  # cleared, refilled
    assert selectors.matches(programs[4], binding) is False  # still answered


def test_a_bindings_results_keep_no_program_alive() -> None:
    """Results are kept by expression: a program the compile cache lets go is freed (each holds
    0.6 MB and 4,000 objects for 10 KiB of source, which every full garbage collection walks), and
    the same expression compiled again finds its result."""
    selectors = SelectorCache()
    binding = bind_device("gpu.example.com", Device.model_validate({"name": "gpu-0"}))
    expression = " || ".join(f"device.driver == 'kept-{j}'" for j in range(40))
    env = Environment()
    uncached = Program(expression, env, *front_end(expression, env))
    freed = weakref.ref(uncached)
    assert selectors.matches(uncached, binding) is False
    del uncached
    gc.collect()
    assert freed() is None
    RESULTS.hits = 0
    assert selectors.matches(compile_expression(expression, env), binding) is False
    assert RESULTS.hits == 1
