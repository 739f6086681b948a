"""Runtime type tests for dynamic overload dispatch (a ``dyn`` receiver calling ``isGreaterThan``
may hold a Quantity or a Semver; the overload is chosen by the value, as cel-go does)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from policies.api.quantity import Quantity
from policies.cel import types as t
from policies.cel.library import CIDR, IP, URL, NamedFormat, Optional, Semver, UInt

_OBJECTS: dict[str, type] = {
    t.QUANTITY.name: Quantity,
    t.SEMVER.name: Semver,
    t.URL.name: URL,
    t.IP.name: IP,
    t.CIDR.name: CIDR,
    t.FORMAT.name: NamedFormat,
}


def matches_type(value: Any, typ: t.Type) -> bool:
    """Could ``value`` be passed where ``typ`` is declared (type parameters and dyn match all)."""
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
        return isinstance(value, list | tuple) and all(matches_type(v, typ.params[0]) for v in value)
    if kind == t.MAP:
        return isinstance(value, Mapping)
    if kind == t.OPAQUE:
        return isinstance(value, Optional)
    if kind == t.OBJECT:
        cls = _OBJECTS.get(typ.name)
        return cls is not None and isinstance(value, cls)
    return False
