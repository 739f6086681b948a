"""cel-go's Lists extension at version 3 (``ext/lists.go``), plus ``first``/``last``.

slice, flatten, lists.range, reverse, distinct and sort are functions here; ``sortBy(x, key)`` is a
macro the engine expands to ``cel.bind(@in, list, @in.@sortByAssociatedKeys(@in.map(x, key)))``,
so ``@sortByAssociatedKeys`` is registered for it. ``first()``/``last()`` come from cel-go's optional
library (version 2 and later), which Kubernetes enables unversioned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.cel.library.cost import (
    MAX_COST,
    STRING_TRAVERSAL_FACTOR,
    CallSite,
    CostRange,
    CostRule,
    actual_size,
    allocating_list,
    times,
)
from policies.cel.library.equality import cel_compare, is_comparable, value_equal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gosort import go_sort_slice
from policies.cel.library.kubelists import COMPARABLE_TYPES
from policies.cel.library.overload import Overload
from policies.cel.library.values import Optional

MAX_RANGE_SIZE = 10_000_000


def list_slice(items: Sequence[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise CELEvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CELEvalError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if len(items) < end:
        raise CELEvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return list(items[start:end])


def flatten(items: Sequence[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise CELEvalError("level must be non-negative")
    out: list[Any] = []
    for item in items:
        if isinstance(item, list | tuple) and depth > 0:
            out.extend(flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def lists_range(n: int) -> list[int]:
    """Negative sizes give an empty list, as cel-go before v0.29; huge sizes are refused outright
    (cel-go's later guard) because the cost limit would reject them anyway, after allocating."""
    if n > MAX_RANGE_SIZE:
        raise CELEvalError(f"lists.range: size {n} exceeds maximum allowed ({MAX_RANGE_SIZE})")
    return list(range(max(n, 0)))


def distinct(items: Sequence[Any]) -> list[Any]:
    unique: list[Any] = []
    for item in items:
        if not any(value_equal(item, seen) is True for seen in unique):
            unique.append(item)
    return unique


def sort_by_associated_keys(items: Sequence[Any], keys: Sequence[Any]) -> list[Any]:
    """``@sortByAssociatedKeys``: order ``items`` by ``keys`` with Go's (unstable) sort.Slice."""
    if len(items) != len(keys):
        raise CELEvalError(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, "
            f"but got {len(items)} and {len(keys)} elements respectively"
        )
    if not items:
        return []
    if not is_comparable(keys[0]):
        raise CELEvalError("list elements must be comparable")
    order = list(range(len(keys)))
    kind = type(keys[0])
    mismatch = False

    def less(i: int, j: int) -> bool:
        nonlocal mismatch
        a, b = keys[order[i]], keys[order[j]]
        if type(a) is not kind or type(b) is not kind:
            mismatch = True
            return False
        try:
            return cel_compare(a, b) == -1
        except CELEvalError:  # NaN: cel-go's Compare error is simply "not less"
            return False

    def swap(i: int, j: int) -> None:
        order[i], order[j] = order[j], order[i]

    go_sort_slice(len(order), less, swap)
    if mismatch:
        raise CELEvalError("list elements must have the same type")
    return [items[i] for i in order]


def sort_list(items: Sequence[Any]) -> list[Any]:
    return sort_by_associated_keys(items, items)


def first(items: Sequence[Any]) -> Optional:
    return Optional.of(items[0]) if items else Optional.none()


def last(items: Sequence[Any]) -> Optional:
    return Optional.of(items[-1]) if items else Optional.none()


# --- costs (ext/lists.go version 3 estimators and trackers) -------------------------------------


def _literal_int(site: CallSite, index: int, default: int) -> int:
    value = site.literal(index)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _slice_size(site: CallSite) -> tuple[int, int]:
    start = _literal_int(site, 1, 0)
    end = _literal_int(site, 2, site.size(0)[1])
    size = max(end - start, 0)
    return (size, size)


def _output_size(args: Sequence[Any], result: Any) -> int:
    return actual_size(result)


def _negative_literal(site: CallSite, index: int) -> bool:
    value = site.literal(index)
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def _range_size(site: CallSite) -> tuple[int, int]:
    # A negative count makes an empty list (cel-go genRange), not an unknown-sized one: the runtime
    # guard checks this estimate before the call and must not trip on lists.range(-1).
    size = 0 if _negative_literal(site, 0) else _literal_int(site, 0, MAX_COST)
    return (size, size)


_SLICE_COST = allocating_list(1, _slice_size, _output_size)
_RANGE_COST = allocating_list(1, _range_size, _output_size)

_REVERSE_COST = allocating_list(1, lambda s: s.size(0), _output_size)


def _flatten_estimate(site: CallSite) -> CostRange:
    if len(site.sizes) > 1 and _negative_literal(site, 1):
        depth = 0  # flatten refuses a negative depth before looking at the list
    else:
        depth = _literal_int(site, 1, MAX_COST) if len(site.sizes) > 1 else 1
    return allocating_list(depth, lambda s: s.size(0), _output_size).estimate(site)


def _flatten_actual(args: Sequence[Any], result: Any) -> int:
    depth = max(args[1], 0) if len(args) == 2 else 1
    return allocating_list(depth, lambda s: s.size(0), lambda a, r: actual_size(a[0])).actual(args, result)


_FLATTEN_COST = CostRule("depth x list size + list allocation", _flatten_estimate, _flatten_actual)


def _self_compare(operand: int, text_elements: bool) -> CostRule:
    """O(n^2) with factor 2 (+0.1 for strings/bytes): distinct, sort, and sortBy's key list."""

    def estimate(site: CallSite) -> CostRange:
        factor = 2 + (STRING_TRAVERSAL_FACTOR if text_elements else 0)
        size = site.size(operand)
        return allocating_list(factor, lambda s: times(size, size), _output_size).estimate(site)

    def actual(args: Sequence[Any], result: Any) -> int:
        values = args[operand]
        factor = 2.0
        if values and isinstance(values[0], str | bytes):
            factor += STRING_TRAVERSAL_FACTOR
        n = len(values)
        return allocating_list(factor, lambda s: (0, 0), lambda a, r: n * n).actual(args, result)

    return CostRule("2 x n^2 comparisons + list allocation", estimate, actual)


def _typed() -> tuple[Overload, ...]:
    out: list[Overload] = []
    for t in COMPARABLE_TYPES:
        text = t in ("string", "bytes")
        out.append(
            Overload(
                "sort",
                f"list_{t}_sort",
                True,
                (f"list({t})",),
                f"list({t})",
                sort_list,
                _self_compare(0, text),
            )
        )
        out.append(
            Overload(
                "@sortByAssociatedKeys",
                f"list_{t}_sortByAssociatedKeys",
                True,
                ("list(T)", f"list({t})"),
                "list(T)",
                sort_by_associated_keys,
                _self_compare(1, text),
            )
        )
    return tuple(out)


_LT = "list(T)"
OVERLOADS: tuple[Overload, ...] = (
    Overload("slice", "list_slice", True, (_LT, "int", "int"), _LT, list_slice, _SLICE_COST),
    Overload("flatten", "list_flatten", True, ("list(list(T))",), _LT, flatten, _FLATTEN_COST),
    Overload("flatten", "list_flatten_int", True, ("list(dyn)", "int"), "list(dyn)", flatten, _FLATTEN_COST),
    Overload("lists.range", "lists_range", False, ("int",), "list(int)", lists_range, _RANGE_COST),
    Overload(
        "reverse", "list_reverse", True, (_LT,), _LT, lambda items: list(reversed(items)), _REVERSE_COST
    ),
    Overload("distinct", "list_distinct", True, (_LT,), _LT, distinct, _self_compare(0, False)),
    *_typed(),
    Overload("first", "list_first", True, (_LT,), "optional_type(T)", first),
    Overload("last", "list_last", True, (_LT,), "optional_type(T)", last),
)
