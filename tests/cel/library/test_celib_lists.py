"""Kubernetes Lists library, cel-go Sets and Lists extensions, and DRA's includes()."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.cel.library import CELEvalError, Optional, UInt, extlists, kubelists, sets
from policies.cel.library.dra import includes
from policies.cel.library.semver import semver

SUM = {o.overload_id: o.impl for o in kubelists.OVERLOADS if o.function == "sum"}


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([1, 2, 3], True),
        (["a", "b", "b", "c"], True),
        ([2.0, 1.0], False),
        ([1], True),
        ([], True),
        ([1, 2.5, 3], True),
        ([3, "a", 0], True),
    ],  # a failing comparison never counts as unsorted
)
def test_is_sorted(items: list[object], expected: bool) -> None:
    assert kubelists.is_sorted(items) is expected


def test_sum_per_element_type() -> None:
    assert SUM["list_int_sum_int"]([1, 3]) == 4
    assert SUM["list_double_sum_double"]([1.0, 3.0]) == 4.0
    assert SUM["list_int_sum_int"]([]) == 0
    assert isinstance(SUM["list_uint_sum_uint"]([UInt(1), UInt(2)]), UInt)


@pytest.mark.parametrize(
    ("overload", "items", "message"),
    [
        ("list_int_sum_int", [2**62, 2**62], "integer overflow"),
        ("list_uint_sum_uint", [UInt(2**64 - 1), UInt(1)], "unsigned integer overflow"),
        ("list_int_sum_int", [1, 1.5], "no such overload"),
    ],
)
def test_sum_errors(overload: str, items: list[object], message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        SUM[overload](items)


def test_min_max() -> None:
    assert kubelists.list_min([1, 3]) == 1
    assert kubelists.list_max([1, 3]) == 3
    assert kubelists.list_min([3.5, 2, UInt(7)]) == 2
    for pick, name in ((kubelists.list_min, "min"), (kubelists.list_max, "max")):
        with pytest.raises(CELEvalError, match=f"{name} called on empty list"):
            pick([])
    with pytest.raises(CELEvalError, match="no such overload"):
        kubelists.list_max([[1], [2]])


def test_index_of_and_last_index_of() -> None:
    assert kubelists.index_of([1, 2, 2, 3], 2) == 1
    assert kubelists.last_index_of(["a", "b", "b", "c"], "b") == 2
    assert kubelists.index_of([1.0], 1.1) == -1
    assert kubelists.index_of([], "string") == -1
    assert kubelists.index_of([1, 2], UInt(2)) == 1


def test_includes_on_lists_and_scalars() -> None:
    assert includes([1, 2, 3], 2)
    assert not includes([1, 2, 3], 4)
    assert includes("model-a", "model-a")
    assert not includes("model-a", "model-b")
    assert includes([semver("1.0.0"), semver("2.0.0")], semver("1.0.0"))
    assert not includes([semver("1.0.0")], "1.0.0")  # erroring comparisons count as unequal


def test_includes_fails_past_the_first_48_elements() -> None:
    # dynamic-resource-allocation/cel/compile.go includesFunc: the iterator errors once it would
    # look at a 49th element (compile_test.go "includes-function-on-very-long-list-runtime-error").
    values = [f"value-{i}" for i in range(49)]
    assert includes(values, "value-47")
    assert not includes(values[:48], "value-48")
    with pytest.raises(
        CELEvalError, match="'includes' function cannot be applied to lists longer than 48 values"
    ):
        includes(values, "value-48")


@pytest.mark.parametrize(
    ("fn", "a", "b", "expected"),
    [
        (sets.sets_contains, [], [], True),
        (sets.sets_contains, [], [1], False),
        (sets.sets_contains, [1, 2, 3, 4], [2, 3], True),
        (sets.sets_contains, [1, 2.0, UInt(3)], [1.0, UInt(2), 3], True),
        (sets.sets_equivalent, [1], [1, 1], True),
        (sets.sets_equivalent, [1, 2, 3], [UInt(3), 2.0, 1], True),
        (sets.sets_equivalent, [1, 2], [1], False),
        (sets.sets_intersects, [1], [], False),
        (sets.sets_intersects, [1], [1, 2], True),
        (sets.sets_intersects, [[1], [2, 3]], [[1, 2], [2, 3.0]], True),
    ],
)
def test_sets(fn: object, a: list[object], b: list[object], expected: bool) -> None:
    assert fn(a, b) is expected  # type: ignore[operator]


def test_slice_flatten_range_reverse_distinct() -> None:
    assert extlists.list_slice([1, 2, 3, 4], 1, 3) == [2, 3]
    assert extlists.flatten([1, [2, 3], [4]]) == [1, 2, 3, 4]
    assert extlists.flatten([1, [2, [3, 4]]]) == [1, 2, [3, 4]]
    assert extlists.flatten([1, [2, [3, [4]]]], 2) == [1, 2, 3, [4]]
    assert extlists.lists_range(5) == [0, 1, 2, 3, 4]
    assert extlists.distinct([1, 2, 2, 3, 3, 3]) == [1, 2, 3]
    assert extlists.distinct([1, "b", 2, "b"]) == [1, "b", 2]
    assert extlists.distinct([1, 1.0, UInt(1)]) == [1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 2), r"cannot slice\(-1, 2\), negative indexes not supported"),
        ((3, 2), r"cannot slice\(3, 2\), start index must be less than or equal to end index"),
        ((1, 5), r"cannot slice\(1, 5\), list is length 4"),
    ],
)
def test_slice_errors(args: tuple[int, int], message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        extlists.list_slice([1, 2, 3, 4], *args)


def test_flatten_refuses_negative_depth() -> None:
    with pytest.raises(CELEvalError, match="level must be non-negative"):
        extlists.flatten([1], -1)


def test_sort_and_its_errors() -> None:
    assert extlists.sort_list([3, 2, 1]) == [1, 2, 3]
    assert extlists.sort_list(["b", "c", "a"]) == ["a", "b", "c"]
    with pytest.raises(CELEvalError, match="list elements must have the same type"):
        extlists.sort_list([1, "b"])
    with pytest.raises(CELEvalError, match="list elements must be comparable"):
        extlists.sort_list([[1, 2, 3]])


def test_sort_by_associated_keys() -> None:
    assert extlists.sort_by_associated_keys(["foo", "bar", "baz"], [3, 1, 2]) == ["bar", "baz", "foo"]
    with pytest.raises(CELEvalError, match="same size as the associated keys list, but got 2 and 1"):
        extlists.sort_by_associated_keys([1, 2], [1])


def test_sort_by_keeps_input_order_for_ties_in_short_lists() -> None:
    # Go's sort.Slice finishes lists of up to 12 elements with an insertion sort, which is stable.
    items = [f"item{i}" for i in range(12)]
    keys = [i % 3 for i in range(12)]
    result = extlists.sort_by_associated_keys(items, keys)
    assert result == [x for k in range(3) for x, key in zip(items, keys, strict=True) if key == k]


# Expected orders printed by Go's sort.Slice (go1.19, the pdqsort that later releases keep) for the
# same keys: ties in lists longer than 12 elements do not keep their input order.
GO_TIE_ORDER_30 = [
    "i12", "i27", "i24", "i3", "i21", "i18", "i6", "i0", "i15", "i9", "i7", "i4", "i10", "i13", "i28",
    "i1", "i16", "i25", "i22", "i19", "i8", "i20", "i5", "i23", "i2", "i17", "i26", "i11", "i14", "i29",
]  # fmt: skip
GO_TIE_ORDER_64 = [
    "j55", "j63", "j62", "j61", "j60", "j59", "j58", "j57", "j56", "j50", "j45", "j53", "j52", "j51",
    "j54", "j49", "j48", "j47", "j46", "j35", "j44", "j43", "j42", "j41", "j40", "j39", "j38", "j37",
    "j36", "j32", "j25", "j31", "j30", "j33", "j34", "j29", "j28", "j27", "j26", "j18", "j15", "j23",
    "j22", "j21", "j20", "j19", "j24", "j17", "j16", "j6", "j8", "j13", "j12", "j11", "j10", "j9",
    "j14", "j7", "j5", "j0", "j4", "j3", "j2", "j1",
]  # fmt: skip


def test_sort_by_ties_come_out_in_go_sort_slice_order() -> None:
    assert extlists.sort_by_associated_keys(
        [f"i{i}" for i in range(30)], [(i * 7) % 3 for i in range(30)]
    ) == (GO_TIE_ORDER_30)
    assert extlists.sort_by_associated_keys(
        [f"j{i}" for i in range(64)], [(64 - i) // 10 for i in range(64)]
    ) == (GO_TIE_ORDER_64)


def test_first_and_last_are_optionals() -> None:
    assert extlists.first([1, 2]) == Optional.of(1)
    assert extlists.last([1, 2]) == Optional.of(2)
    assert not extlists.first([]).has_value()


@given(st.lists(st.integers(-50, 50), max_size=200))
def test_go_sort_orders_any_int_list(values: list[int]) -> None:
    assert extlists.sort_list(values) == sorted(values)


@given(st.lists(st.integers(0, 5), max_size=120))
def test_sort_by_is_a_permutation_ordered_by_key(keys: list[int]) -> None:
    items = list(range(len(keys)))
    result = extlists.sort_by_associated_keys(items, keys)
    assert sorted(result) == items
    assert [keys[i] for i in result] == sorted(keys)


def test_sort_handles_nan_without_failing() -> None:
    values = [3.0, math.nan, 1.0] + [random.Random(7).random() for _ in range(20)]
    assert len(extlists.sort_list(values)) == len(values)
