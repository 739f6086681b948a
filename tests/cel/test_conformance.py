"""The CEL conformance table (conformance.yaml), run against both engines.

Each row is an expression, a device and what cel-go (with the Kubernetes libraries, as the 1.36
scheduler and API server run it) answers: true/false, a runtime error, or a compile error, plus
upstream's cost estimate where one is known. The default engine must match every row. Rows where
cel-python is known to differ carry a ``celpy`` entry with what it does instead; that entry is
asserted too (so a fixed difference, or a new one, fails the suite rather than going unnoticed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.api.resource import Device
from policies.cel import CompileError, Environment, EvalError, bind_device, compile_expression

TABLE = yaml.safe_load((Path(__file__).parent / "conformance.yaml").read_text())
DEVICES: dict[str, dict[str, Any]] = TABLE["devices"]
CASES: list[dict[str, Any]] = TABLE["cases"]


def _env(case: dict[str, Any], engine: str) -> Environment:
    env = case.get("env", {})
    return Environment(
        kind=env.get("kind", "stored"),
        list_type_attributes=env.get("listTypeAttributes", False),
        consumable_capacity=env.get("consumableCapacity", True),
        engine=engine,  # type: ignore[arg-type]
    )


def _device(case: dict[str, Any]) -> dict[str, Any]:
    spec = case.get("device", "gpu")
    return DEVICES[spec] if isinstance(spec, str) else spec


def _outcome(case: dict[str, Any], engine: str) -> Any:
    """What the engine does with the case: True/False, {"error": msg} or {"compileError": msg}."""
    env = _env(case, engine)
    try:
        program = compile_expression(case["expr"], env)
    except CompileError as exc:
        return {"compileError": exc.message}
    spec = _device(case)
    device = Device.model_validate(spec.get("device", {"name": "dev"}))
    binding = bind_device(spec.get("driver", ""), device, env, pool=spec.get("pool", "pool"))
    try:
        return program.matches(binding)
    except EvalError as exc:
        return {"error": exc.message, "device": exc.device}


def _agrees(outcome: Any, expected: Any) -> bool:
    if isinstance(expected, bool):
        return outcome is expected
    kind = next(iter(expected))
    return isinstance(outcome, dict) and kind in outcome and expected[kind] in outcome[kind]


def _ids() -> list[str]:
    return [case["name"] for case in CASES]


def test_table_is_large_and_names_are_unique() -> None:
    names = _ids()
    assert len(names) >= 150
    assert len(set(names)) == len(names), [n for n in names if names.count(n) > 1]


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_rust_engine(case: dict[str, Any]) -> None:
    outcome = _outcome(case, "rust")
    assert _agrees(outcome, case["expect"]), f"{case['expr']!r}: got {outcome!r}, cel-go: {case['expect']!r}"
    if "cost" in case:
        assert compile_expression(case["expr"], _env(case, "rust")).estimated_cost == case["cost"]


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_celpy_engine(case: dict[str, Any]) -> None:
    difference = case.get("celpy")
    expected = difference["expect"] if difference else case["expect"]
    outcome = _outcome(case, "celpy")
    assert _agrees(outcome, expected), f"{case['expr']!r}: got {outcome!r}, expected {expected!r}"
    if difference:
        assert difference["why"], "a known difference must say what it is"
        assert not _agrees(outcome, case["expect"]), "marked as a difference but celpy now agrees"


def test_runtime_errors_name_the_device() -> None:
    case = next(c for c in CASES if c["name"] == "missing-attribute-is-an-error")
    outcome = _outcome(case, "rust")
    spec = _device(case)
    assert outcome["device"] == f"{spec['driver']}/{spec['pool']}/{spec['device']['name']}"
