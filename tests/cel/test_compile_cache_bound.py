"""The compiled-program cache is bounded by the length of what it holds, not only by its count:
long selectors (10 KiB each, 0.6 MB compiled) would otherwise hold gigabytes (issue 16)."""

import pytest

from policies.cel import compile_expression, program


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
