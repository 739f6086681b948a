"""Quantity library rows from upstream's quantity_test.go (reworded)."""

import pytest

from policies.api.quantity import Quantity
from policies.cel.library import CELEvalError, cel_contains, cel_equals
from policies.cel.library.quantity import OVERLOADS, as_integer, is_quantity, quantity

FN = {o.overload_id: o.impl for o in OVERLOADS}
q = Quantity.parse


def test_parse_returns_the_value() -> None:
    assert quantity("12Mi") == q("12Mi")


@pytest.mark.parametrize(
    ("text", "message"),
    [("10Mo", "quantities must match the regular expression"), ("10Mm", "unable to parse quantity's suffix")],
)
def test_parse_errors_use_parse_quantity_wording(text: str, message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        quantity(text)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("20", True),
        ("20M", True),
        ("20Mi", True),
        ("20Mo", False),
        ("10Mm", False),
        ("1,3G", False),
        ("Three", False),
    ],
)
def test_is_quantity(text: str, valid: bool) -> None:
    assert is_quantity(text) is valid


@pytest.mark.parametrize(
    ("overload", "a", "b", "expected"),
    [
        ("quantity_is_less_than", "50M", "50Mi", True),
        ("quantity_is_less_than", "100M", "50M", False),
        ("quantity_is_greater_than", "50Mi", "50M", True),
        ("quantity_is_greater_than", "50M", "100M", False),
        ("quantity_compare_to", "200M", "0.2G", 0),
        ("quantity_compare_to", "50M", "50Mi", -1),
        ("quantity_compare_to", "50Mi", "50M", 1),
    ],
)
def test_comparisons(overload: str, a: str, b: str, expected: object) -> None:
    assert FN[overload](q(a), q(b)) == expected


def test_arithmetic_with_quantities_and_ints() -> None:
    assert FN["quantity_add"](q("50k"), q("20")) == q("50.02k")
    assert FN["quantity_add_int"](q("50k"), 20) == q("50020")
    assert FN["quantity_sub"](q("50k"), q("20")) == q("49.98k")
    assert FN["quantity_sub_int"](q("50k"), 20) == q("49980")
    chained = FN["quantity_sub_int"](
        FN["quantity_sub"](FN["quantity_add_int"](q("50k"), 20), q("100k")), -50000
    )
    assert as_integer(chained) == 20


def test_as_integer_and_is_integer() -> None:
    assert as_integer(q("50k")) == 50000
    assert FN["quantity_is_integer"](q("50")) is True
    huge = q("9999999999999999999999999999999999999G")
    assert FN["quantity_is_integer"](huge) is False
    with pytest.raises(CELEvalError, match="cannot convert value to integer"):
        as_integer(huge)


def test_as_approximate_float_and_sign() -> None:
    assert FN["quantity_get_float"](q("50.703k")) == 50703.0
    assert [FN["quantity_sign"](q(t)) for t in ("-1", "0", "5m")] == [-1, 0, 1]


def test_sign_is_declared_only_as_a_global_function() -> None:
    (sign,) = [o for o in OVERLOADS if o.function == "sign"]
    assert sign.member is False


def test_computed_quantities_only_equal_a_plain_quantity_on_the_right() -> None:
    """Upstream add()/sub() return Go pointers and Quantity.Equal only accepts a value operand."""
    computed = FN["quantity_add_int"](q("1"), 1)
    assert cel_equals(computed, q("2"))
    assert not cel_equals(q("2"), computed)
    assert not cel_equals(computed, FN["quantity_add_int"](q("1"), 1))
    assert cel_equals([computed], [q("2")])
    assert not cel_contains([computed], q("2"))
    assert FN["quantity_compare_to"](q("2"), computed) == 0  # ordering is unaffected
