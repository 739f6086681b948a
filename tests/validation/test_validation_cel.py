"""Selector compilation during validation (validateCELExpression).

The engine is policies.cel; these tests pin down what validation makes of its answers: a compile
error, an estimate above the cost limit, and stored expressions compiled in the permissive
environment.
"""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import changed, claim, device_class, exact, lines

from policies.cel import CompileError, Environment
from policies.validation import cel as validation_cel
from policies.validation.cel import validate_cel_expression
from policies.validation.fielderrors import ErrorType, Path

SELECTOR_PATH = "spec.devices.requests[0].exactly.selectors[0].cel.expression"
PATH = Path("spec", "selectors[0]", "cel", "expression")
GATED = 'device.attributes["dra.example.com"].model.includes("a100")'  # DRAListTypeAttributes
EXPENSIVE = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, " * 7 + "true" + ")" * 7


def with_selector(expression: str) -> dict[str, Any]:
    return claim(exact(selectors=[{"cel": {"expression": expression}}]))


class FakeProgram:
    def __init__(self, cost: int) -> None:
        self.estimated_cost = cost


def test_valid_selector_compiles() -> None:
    assert lines(with_selector('device.driver == "dra.example.com"')) == []


def test_syntax_error_is_an_invalid_value_with_the_engine_message() -> None:
    found = lines(with_selector("device.driver =="))
    assert len(found) == 1
    assert found[0].startswith(f'{SELECTOR_PATH}: Invalid value: "device.driver ==": compilation failed: ')
    assert "Syntax error" in found[0]


def test_compiled_in_the_new_expressions_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, Environment]] = []

    def compile_expression(expression: str, env: Environment) -> FakeProgram:
        seen.append((expression, env))
        return FakeProgram(1)

    monkeypatch.setattr(validation_cel, "compile_expression", compile_expression)
    assert lines(with_selector("true")) == []
    assert seen == [("true", Environment(kind="new", list_type_attributes=False, consumable_capacity=True))]


def test_compile_error_message_is_shown_as_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    def compile_expression(expression: str, env: Environment) -> FakeProgram:
        raise CompileError("must evaluate to bool or the unknown type, not int")

    monkeypatch.setattr(validation_cel, "compile_expression", compile_expression)
    assert lines(with_selector("1 + 1")) == [
        f'{SELECTOR_PATH}: Invalid value: "1 + 1": must evaluate to bool or the unknown type, not int'
    ]


@pytest.mark.parametrize(
    ("cost", "expected"),
    [(1_000_000, []), (1_000_001, [f"{SELECTOR_PATH}: Forbidden: too complex, exceeds cost limit"])],
)
def test_cost_limit(monkeypatch: pytest.MonkeyPatch, cost: int, expected: list[str]) -> None:
    monkeypatch.setattr(validation_cel, "compile_expression", lambda expression, env: FakeProgram(cost))
    assert lines(with_selector("true")) == expected


def test_too_long_expression_is_not_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    def compile_expression(expression: str, env: Environment) -> FakeProgram:
        raise AssertionError("a too long expression must not reach the compiler")

    monkeypatch.setattr(validation_cel, "compile_expression", compile_expression)
    assert lines(with_selector("x" * 10241)) == [
        f"{SELECTOR_PATH}: Too long: may not be more than 10240 bytes"
    ]


def test_unchanged_class_selectors_compile_in_the_stored_environment() -> None:
    """validation.go validateCELSelector checks an unchanged selector too, in the permissive stored
    environment: a gated function it already holds stays valid, a broken one is still an error, and
    any change to the list makes every selector new again."""
    gated = {"cel": {"expression": GATED}}
    fine = {"cel": {"expression": "true"}}
    old = device_class(selectors=[gated])
    assert lines(old, old) == []
    assert lines(changed(old, "metadata.labels", {"a": "b"}), old) == []
    reordered = lines(changed(old, "spec.selectors", [fine, gated]), old)
    assert [line.split(": ")[0] for line in reordered] == ["spec.selectors[1].cel.expression"]
    assert "undeclared reference to 'includes'" in reordered[0]
    broken = device_class(selectors=[{"cel": {"expression": "device.driver =="}}])
    assert [line.split(": Invalid value: ")[0] for line in lines(broken, broken)] == [
        "spec.selectors[0].cel.expression"
    ]


def test_class_selectors_are_compiled_on_create() -> None:
    found = lines(device_class(selectors=[{"cel": {"expression": "device.driver =="}}]))
    assert [line.split(": Invalid value: ")[0] for line in found] == ["spec.selectors[0].cel.expression"]


# --- validate_cel_expression directly: both environments (upstream validateCELSelector) -------------


def test_new_expressions_reject_gated_functions() -> None:
    errors = validate_cel_expression(GATED, PATH)
    assert [e.type for e in errors] == [ErrorType.INVALID]
    assert "undeclared reference to 'includes'" in errors[0].detail


def test_stored_expressions_compile_in_the_permissive_environment() -> None:
    assert validate_cel_expression(GATED, PATH, stored=True) == []


def test_stored_expressions_are_still_compiled() -> None:
    errors = validate_cel_expression("device.nosuch == 1", PATH, stored=True)
    assert [e.type for e in errors] == [ErrorType.INVALID]
    assert "undefined field 'nosuch'" in errors[0].detail


def test_stored_expressions_are_still_cost_checked() -> None:
    for stored in (False, True):
        errors = validate_cel_expression(EXPENSIVE, PATH, stored=stored)
        assert [(e.type, e.detail) for e in errors] == [
            (ErrorType.FORBIDDEN, "too complex, exceeds cost limit")
        ]


def test_length_limit_applies_to_both() -> None:
    long = "true" + " " * 10237
    for stored in (False, True):
        assert [e.type for e in validate_cel_expression(long, PATH, stored=stored)] == [ErrorType.TOO_LONG]
    assert validate_cel_expression("true" + " " * 10236, PATH) == []
