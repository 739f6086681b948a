"""Runtime type tests for dynamic overload dispatch (a ``dyn`` receiver calling ``isGreaterThan``
may hold a Quantity or a Semver; the overload is chosen by the value, as cel-go does).

cel-go guards every extension function this way (``common/decls/decls.go``, ``OverloadDecl``'s
runtime signature match over ``Type.IsAssignableRuntimeType`` in ``common/types/types.go``), so
``dyn(1).charAt(0)`` is ``no such overload: charAt(int, int)`` rather than an answer.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from policies.api.quantity import Quantity
from policies.cel import types as t
from policies.cel.library import (
    CIDR,
    IP,
    URL,
    CELEvalError,
    NamedFormat,
    Optional,
    Semver,
    UInt,
    cel_type_name,
)

_OBJECTS: dict[str, type] = {
    t.QUANTITY.name: Quantity,
    t.SEMVER.name: Semver,
    t.URL.name: URL,
    t.IP.name: IP,
    t.CIDR.name: CIDR,
    t.FORMAT.name: NamedFormat,
}


def no_such_overload(function: str, args: tuple[Any, ...]) -> CELEvalError:
    """cel-go's MaybeNoSuchOverload: the function and the runtime types of its arguments (the
    receiver first)."""
    return CELEvalError(f"no such overload: {function}({', '.join(map(cel_type_name, args))})")


def matches_type(value: Any, typ: t.Type) -> bool:
    """Could ``value`` be passed where ``typ`` is declared (type parameters and dyn match all).

    Like cel-go, a list or map is judged by its first element (or entry) only."""
    kind = typ.kind
    if kind in ("dyn", "any", t.PARAM):
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool | UInt)
    if kind == "uint":  # the Rust engine hands uints back as plain ints
        return isinstance(value, UInt) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0
        )
    if kind == "double":
        return isinstance(value, float)
    if kind == "string":
        return isinstance(value, str)
    if kind == "bytes":
        return isinstance(value, bytes)
    if kind == "null_type":
        return value is None
    if kind == "timestamp":
        return isinstance(value, datetime.datetime)
    if kind == "duration":
        return isinstance(value, datetime.timedelta)
    if kind == t.LIST:
        return isinstance(value, list | tuple) and (not value or matches_type(value[0], typ.params[0]))
    if kind == t.MAP:
        if not isinstance(value, Mapping):
            return False
        key = next(iter(value), None)
        return not value or (matches_type(key, typ.params[0]) and matches_type(value[key], typ.params[1]))
    if kind == t.OPAQUE:
        return isinstance(value, Optional)
    if kind == t.OBJECT:
        cls = _OBJECTS.get(typ.name)
        return cls is not None and isinstance(value, cls)
    return False
