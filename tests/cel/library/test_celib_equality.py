"""cel-go equality and ordering: cross-type numbers through float64, NaN, containers, objects."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.api.quantity import Quantity
from policies.cel.library import (
    CELEvalError,
    Optional,
    UInt,
    cel_compare,
    cel_contains,
    cel_equals,
    cel_type_name,
)
from policies.cel.library.semver import semver


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (1, UInt(1), True),
        (UInt(2), 2.0, True),
        (2**53 + 1, 9007199254740992.0, True),  # int -> float64 loses the +1, as in cel-go
        (2**53 + 1, 2**53, False),  # int == int stays exact
        (-1, UInt(18446744073709551615), False),
        (math.nan, math.nan, False),
        (1, math.nan, False),
        (True, 1, False),  # bool is not a number in CEL
        ("5", 5, False),
        (b"a", "a", False),
        (None, None, True),
        (None, 0, False),
        ([1, 2.0], [1.0, UInt(2)], True),
        ([1], [1, 2], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({1: "x"}, {UInt(1): "x"}, True),
        ({"a": 1}, {"b": 1}, False),
        (Optional.none(), Optional.none(), True),
        (Optional.of(1), Optional.of(1.0), True),
        (Optional.of(1), Optional.none(), False),
    ],
)
def test_equality_matches_cel_go(a: object, b: object, equal: bool) -> None:
    assert cel_equals(a, b) is equal
    assert cel_equals(b, a) is equal


def test_quantities_compare_by_value_and_are_unequal_to_other_types() -> None:
    assert cel_equals(Quantity.parse("200M"), Quantity.parse("0.2G"))
    assert not cel_equals(Quantity.parse("1"), 1)


def test_semver_against_another_type_is_no_such_overload() -> None:
    with pytest.raises(CELEvalError, match="no such overload"):
        cel_equals(semver("1.0.0"), "1.0.0")
    # ...but inside a list an erroring element comparison does not make the lists unequal.
    assert cel_equals([semver("1.0.0")], ["1.0.0"])
    assert not cel_contains(["1.0.0"], semver("1.0.0"))


def test_contains_uses_heterogeneous_equality() -> None:
    assert cel_contains([1, 2, 3], 2.0)
    assert cel_contains([UInt(3)], 3)
    assert not cel_contains([], 1)


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        (1, 2.5, -1),
        (UInt(3), 2, 1),
        ("b", "a", 1),
        (b"a", b"b", -1),
        (False, True, -1),
        (2**53 + 1, 2.0**53, 0),
    ],
)
def test_ordering(a: object, b: object, order: int) -> None:
    assert cel_compare(a, b) == order


@pytest.mark.parametrize(
    ("a", "b", "message"), [(1, math.nan, "NaN values cannot be ordered"), ("a", 1, "no such overload")]
)
def test_unorderable_operands_are_errors(a: object, b: object, message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        cel_compare(a, b)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (True, "bool"),
        (1, "int"),
        (UInt(1), "uint"),
        (1.0, "double"),
        ("s", "string"),
        (b"", "bytes"),
        (None, "null_type"),
        ([], "list"),
        ({}, "map"),
        (Quantity.parse("1"), "kubernetes.Quantity"),
        (semver("1.0.0"), "kubernetes.Semver"),
        (Optional.none(), "optional_type"),
    ],
)
def test_runtime_type_names(value: object, name: str) -> None:
    assert cel_type_name(value) == name


def test_uint_refuses_values_outside_uint64() -> None:
    with pytest.raises(ValueError, match="uint"):
        UInt(-1)


def test_empty_optional_value_is_an_error() -> None:
    with pytest.raises(CELEvalError, match=r"optional.none\(\) dereference"):
        Optional.none().value()
    assert Optional.none().or_value(3) == 3


numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**64 - 1).map(UInt),
    st.floats(allow_nan=True, allow_infinity=True),
)


@given(numbers, numbers)
def test_numeric_equality_is_symmetric_and_agrees_with_ordering(a: int | float, b: int | float) -> None:
    assert cel_equals(a, b) == cel_equals(b, a)
    if not (isinstance(a, float) and math.isnan(a)) and not (isinstance(b, float) and math.isnan(b)):
        assert (cel_compare(a, b) == 0) == cel_equals(a, b)
