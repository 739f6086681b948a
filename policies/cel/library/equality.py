"""CEL equality, ordering and runtime type names with cel-go's semantics.

cel-go compares numbers across int, uint and double (``1 == 1u``, ``1 == 1.0``) by converting ints to
float64, so ``2^53 + 1 == 9007199254740992.0`` holds; NaN equals nothing and cannot be ordered.
Values of unrelated types are simply unequal, except that the Kubernetes object types (Semver, URL,
IP, CIDR, NamedFormat) report "no such overload" when compared with anything else, as their
``Equal`` methods in ``k8s.io/apiserver/pkg/cel`` do. Lists and maps compare element-wise, and an
element comparison that errors does not make the containers unequal (``types.baseList.Equal``).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from policies.api.quantity import Quantity
from policies.cel.library.errors import CELEvalError
from policies.cel.library.urls import url_string
from policies.cel.library.values import CIDR, IP, URL, DerivedQuantity, NamedFormat, Optional, Semver, UInt

NO_SUCH_OVERLOAD = "no such overload"

_OBJECT_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (Quantity, "kubernetes.Quantity"),
    (Semver, "kubernetes.Semver"),
    (URL, "kubernetes.URL"),
    (IP, "net.IP"),
    (CIDR, "net.CIDR"),
    (NamedFormat, "kubernetes.NamedFormat"),
    (Optional, "optional_type"),
    (datetime.timedelta, "google.protobuf.Duration"),
    (datetime.datetime, "google.protobuf.Timestamp"),
)


def cel_type_name(value: Any) -> str:
    """The runtime type name cel-go prints for ``value`` (``type(x)``, error messages)."""
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, UInt):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    for cls, name in _OBJECT_TYPE_NAMES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numbers_equal(a: int | float, b: int | float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        x, y = float(a), float(b)
        return not (math.isnan(x) or math.isnan(y)) and x == y
    return int(a) == int(b)


def value_equal(a: Any, b: Any) -> bool | None:
    """``a.Equal(b)`` in cel-go: True, False, or None where cel-go returns an error value."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a):
        return is_number(b) and _numbers_equal(a, b)
    if isinstance(a, str | bytes):
        return type(a) is type(b) and a == b
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and _lists_equal(a, b)
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and _maps_equal(a, b)
    if isinstance(a, Quantity):
        # apiservercel.Quantity.Equal: anything but a Quantity *value* is simply unequal, and the
        # results of add()/sub() are pointers upstream (see DerivedQuantity).
        return isinstance(b, Quantity) and not isinstance(b, DerivedQuantity) and a.cmp(b) == 0
    if isinstance(a, Optional):
        return isinstance(b, Optional) and _optionals_equal(a, b)
    if isinstance(a, Semver | URL | IP | CIDR | NamedFormat):
        return _object_equal(a, b)
    return type(a) is type(b) and bool(a == b)


def _object_equal(a: Semver | URL | IP | CIDR | NamedFormat, b: Any) -> bool | None:
    if type(a) is not type(b):
        return None
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b) == 0
    if isinstance(a, URL) and isinstance(b, URL):
        return url_string(a) == url_string(b)
    return bool(a == b)


def _lists_equal(a: Sequence[Any], b: Sequence[Any]) -> bool:
    if len(a) != len(b):
        return False
    return all(value_equal(x, y) is not False for x, y in zip(a, b, strict=True))


def _maps_equal(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    for key, value in a.items():
        found, other = map_lookup(b, key)
        if not found or value_equal(value, other) is False:
            return False
    return True


def _optionals_equal(a: Optional, b: Optional) -> bool:
    if not a.has_value() or not b.has_value():
        return a.has_value() == b.has_value()
    return value_equal(a.value(), b.value()) is True


def map_lookup(mapping: Mapping[Any, Any], key: Any) -> tuple[bool, Any]:
    """Find ``key`` the way CEL map access does: numeric keys match across int, uint and double."""
    for candidate, value in mapping.items():
        same_kind = type(candidate) is type(key) or (is_number(candidate) and is_number(key))
        if same_kind and value_equal(candidate, key) is True:
            return True, value
    return False, None


def cel_equals(a: Any, b: Any) -> bool:
    """The ``==`` operator: raise where cel-go's ``==`` yields an error (Semver == string)."""
    result = value_equal(a, b)
    if result is None:
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return result


def cel_contains(items: Iterable[Any], needle: Any) -> bool:
    """``needle in items`` for lists: an element comparison that errors counts as "not equal"."""
    return any(value_equal(needle, item) is True for item in items)


def cel_compare(a: Any, b: Any) -> int:
    """``a.Compare(b)``: -1, 0 or 1, or the error cel-go raises for unordered operands."""
    if is_number(a) and is_number(b):
        return _compare_numbers(a, b)
    comparable = (bool, str, bytes, datetime.timedelta, datetime.datetime)
    if isinstance(a, comparable) and type(a) is type(b) and not is_number(a):
        return _three_way(a, b)
    raise CELEvalError(NO_SUCH_OVERLOAD)


def _three_way(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _compare_numbers(a: int | float, b: int | float) -> int:
    if isinstance(a, float) or isinstance(b, float):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            raise CELEvalError("NaN values cannot be ordered")
        return (x > y) - (x < y)
    return (a > b) - (a < b)


def is_comparable(value: Any) -> bool:
    """Whether cel-go's value type implements ``traits.Comparer`` (may appear in sort/min/max)."""
    return is_number(value) or isinstance(value, bool | str | bytes | datetime.timedelta | datetime.datetime)
