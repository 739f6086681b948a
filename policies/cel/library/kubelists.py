"""The Kubernetes Lists library (``library/lists.go``): isSorted, sum, min, max, indexOf, lastIndexOf.

isSorted/min/max are declared for lists of the comparable types (int, uint, double, bool, duration,
timestamp, string, bytes) and sum for the summable ones (int, uint, double, duration), one overload
per element type. A comparison that errors (mixed types, NaN) is skipped, as upstream ignores any
Compare result other than the one it looks for; an element that cannot be compared at all fails.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from policies.cel.library.cost import LIST_SCAN
from policies.cel.library.equality import NO_SUCH_OVERLOAD, cel_compare, is_comparable, value_equal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.overload import Overload
from policies.cel.library.values import UInt, check_int64, check_uint64

COMPARABLE_TYPES = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
_MAX_NANOS = (1 << 63) - 1


def _compare_or_none(a: Any, b: Any) -> int | None:
    try:
        return cel_compare(a, b)
    except CELEvalError:
        return None


def _require_comparable(value: Any) -> Any:
    if not is_comparable(value):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return value


def is_sorted(items: Sequence[Any]) -> bool:
    previous = None
    for index, item in enumerate(items):
        _require_comparable(item)
        if index and _compare_or_none(previous, item) == 1:
            return False
        previous = item
    return True


def _pick(name: str, replace_when: int) -> Callable[[Sequence[Any]], Any]:
    def pick(items: Sequence[Any]) -> Any:
        if not items:
            raise CELEvalError(f"{name} called on empty list")
        result = _require_comparable(items[0])
        for item in items[1:]:
            _require_comparable(item)
            if _compare_or_none(result, item) == replace_when:
                result = item
        return result

    return pick


list_min = _pick("min", 1)
list_max = _pick("max", -1)


def _add_int(acc: Any, item: Any) -> Any:
    if type(item) is not int:
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return check_int64(acc + item)


def _add_uint(acc: Any, item: Any) -> Any:
    if not isinstance(item, UInt):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return check_uint64(acc + item)


def _add_double(acc: Any, item: Any) -> Any:
    if not isinstance(item, float):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return acc + item


def _add_duration(acc: Any, item: Any) -> Any:
    if not isinstance(item, datetime.timedelta):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    total = acc + item
    if abs(total // datetime.timedelta(microseconds=1)) * 1000 > _MAX_NANOS:
        raise CELEvalError("duration overflow")
    return total


_SUMMABLE: tuple[tuple[str, Any, Callable[[Any, Any], Any]], ...] = (
    ("int", 0, _add_int),
    ("uint", UInt(0), _add_uint),
    ("double", 0.0, _add_double),
    ("duration", datetime.timedelta(0), _add_duration),
)


def _summer(zero: Any, add: Callable[[Any, Any], Any]) -> Callable[[Sequence[Any]], Any]:
    def total(items: Sequence[Any]) -> Any:
        acc = zero
        for item in items:
            acc = add(acc, item)
        return acc

    return total


def index_of(items: Sequence[Any], needle: Any) -> int:
    return next((i for i, item in enumerate(items) if value_equal(item, needle) is True), -1)


def last_index_of(items: Sequence[Any], needle: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if value_equal(items[i], needle) is True:
            return i
    return -1


def _per_type() -> tuple[Overload, ...]:
    out: list[Overload] = []
    for t in COMPARABLE_TYPES:
        lt = f"list({t})"
        out.append(
            Overload("isSorted", f"list_{t}_is_sorted_bool", True, (lt,), "bool", is_sorted, LIST_SCAN)
        )
        out.append(Overload("max", f"list_{t}_max_{t}", True, (lt,), t, list_max, LIST_SCAN))
        out.append(Overload("min", f"list_{t}_min_{t}", True, (lt,), t, list_min, LIST_SCAN))
    for t, zero, add in _SUMMABLE:
        out.append(
            Overload("sum", f"list_{t}_sum_{t}", True, (f"list({t})",), t, _summer(zero, add), LIST_SCAN)
        )
    return tuple(out)


OVERLOADS: tuple[Overload, ...] = (
    *_per_type(),
    Overload("indexOf", "list_a_index_of_int", True, ("list(A)", "A"), "int", index_of, LIST_SCAN),
    Overload(
        "lastIndexOf", "list_a_last_index_of_int", True, ("list(A)", "A"), "int", last_index_of, LIST_SCAN
    ),
)
