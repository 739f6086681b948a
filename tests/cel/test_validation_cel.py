"""Selector validation (policies.validation.cel) as upstream validateCELSelector does it.

pkg/apis/resource/validation/validation.go checks the length, compiles and checks the estimated
cost of every selector; an unchanged (stored) one compiles in the StoredExpressions environment,
where gated fields and functions are declared whatever the feature gates say.
"""

from __future__ import annotations

from policies.validation.cel import validate_cel_expression
from policies.validation.fielderrors import ErrorType, Path

PATH = Path("spec", "selectors[0]", "cel", "expression")
GATED = 'device.attributes["dra.example.com"].model.includes("a100")'  # DRAListTypeAttributes
EXPENSIVE = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, " * 7 + "true" + ")" * 7


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
