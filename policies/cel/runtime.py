"""Standard CEL operations whose engine-native versions differ from cel-go, over plain Python values.

The lowering calls these instead of the engine's operator wherever the static types allow a
difference: equality and membership on values that may be Kubernetes objects (``Semver ==
string`` is an error in cel-go, Quantity equality is by value), ordering with doubles or dynamic
operands (NaN cannot be ordered), ``size()`` of strings (code points, not bytes), map access with
numeric keys of another type, conversions the engines lack or print differently, ``matches`` (RE2),
optional-typed access, and the map insert of the two-variable comprehension macros.
"""

from __future__ import annotations

import datetime
import math
import zoneinfo
from collections.abc import Mapping, Sequence
from typing import Any

from policies.cel.conversions import convert
from policies.cel.library import CELEvalError, Optional, UInt, cel_compare, cel_contains, cel_equals, matches
from policies.cel.library.equality import map_lookup
from policies.cel.library.gofmt import go_format_g

NO_SUCH_OVERLOAD = "no such overload"


def eq(a: Any, b: Any) -> bool:
    return cel_equals(a, b)


def ne(a: Any, b: Any) -> bool:
    return not cel_equals(a, b)


def lt(a: Any, b: Any) -> bool:
    return cel_compare(a, b) < 0


def le(a: Any, b: Any) -> bool:
    return cel_compare(a, b) <= 0


def gt(a: Any, b: Any) -> bool:
    return cel_compare(a, b) > 0


def ge(a: Any, b: Any) -> bool:
    return cel_compare(a, b) >= 0


def in_(item: Any, container: Any) -> bool:
    if isinstance(container, list | tuple):
        return cel_contains(container, item)
    if isinstance(container, Mapping):
        return map_lookup(container, item)[0]
    raise CELEvalError(NO_SUCH_OVERLOAD)


def size(value: Any) -> int:
    """cel-go size(): strings count code points (Python str length), not UTF-8 bytes."""
    if isinstance(value, str | bytes | list | tuple | Mapping):
        return len(value)
    raise CELEvalError(NO_SUCH_OVERLOAD)


def index(container: Any, key: Any) -> Any:
    """``container[key]``: lists by integral number, maps by key with numeric keys cross-matched."""
    if isinstance(container, list | tuple):
        if isinstance(key, bool) or not isinstance(key, int | float):
            raise CELEvalError(NO_SUCH_OVERLOAD)
        if isinstance(key, float) and not key.is_integer():
            raise CELEvalError(f"unsupported index value {key}")
        i = int(key)
        if not 0 <= i < len(container):
            raise CELEvalError(f"index out of bounds: {i}")
        return container[i]
    if isinstance(container, Mapping):
        found, value = map_lookup(container, key)
        if not found:
            raise CELEvalError(f"no such key: {key_text(key)}")
        return value
    # cel-go interpreter/attributes.go refQualify: a value that is neither a map, a list nor an
    # indexer (a string, a number, a Semver...) has no keys at all.
    raise CELEvalError(f"no such key: {key_text(key)}")


def key_text(key: Any) -> str:
    """A key as Go's %v prints a CEL value in "no such key: %v"."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return go_format_g(key)
    return str(key)


def has_field(container: Any, name: str) -> bool:
    """``has(x.f)`` once ``x`` is evaluated (an optional x tests its value, an empty one is false).
    On a value without fields (a string attribute, say) cel-go's presence test is simply false."""
    if isinstance(container, Optional):
        if not container.has_value():
            return False
        container = container.value()
    if isinstance(container, Mapping):
        return map_lookup(container, name)[0]
    if isinstance(container, list | tuple):
        raise CELEvalError("unsupported index type 'string' in list")
    return False


def opt_index(container: Any, key: Any) -> Optional:
    """``container[?key]`` and ``container.?key``: an optional, empty when the key is absent."""
    if isinstance(container, Optional):
        if not container.has_value():
            return container
        container = container.value()
    try:
        return Optional.of(index(container, key))
    except CELEvalError as exc:
        if str(exc).startswith(("no such key", "index out of bounds")):
            return Optional.none()
        raise


def opt_chain(container: Optional, key: Any) -> Optional:
    """``opt.field`` / ``opt[key]`` on an optional: absent stays absent, a missing key is an error."""
    if not container.has_value():
        return container
    return Optional.of(index(container.value(), key))


def opt_list(flags: Sequence[bool], *items: Any) -> list[Any]:
    """``[a, ?b, c]``: optional elements (flag true) are included only when they hold a value."""
    out: list[Any] = []
    for optional, item in zip(flags, items, strict=True):
        if not optional:
            out.append(item)
        elif not isinstance(item, Optional):
            raise CELEvalError(NO_SUCH_OVERLOAD)
        elif item.has_value():
            out.append(item.value())
    return out


def opt_map(flags: Sequence[bool], *pairs: Any) -> dict[Any, Any]:
    """``{k: v, ?k2: v2}`` with the same rule, duplicate keys being an error as in cel-go."""
    out: dict[Any, Any] = {}
    for i, optional in enumerate(flags):
        key, value = pairs[2 * i], pairs[2 * i + 1]
        if optional:
            if not isinstance(value, Optional):
                raise CELEvalError(NO_SUCH_OVERLOAD)
            if not value.has_value():
                continue
            value = value.value()
        if map_lookup(out, key)[0]:
            raise CELEvalError(f"Failed with repeated key: {key}")
        out[key] = value
    return out


def map_insert(mapping: Mapping[Any, Any], key_or_entry: Any, *value: Any) -> dict[Any, Any]:
    """cel.@mapInsert of transformMap/transformMapEntry: a new map, a duplicate key is an error."""
    entries = dict(key_or_entry) if not value else {key_or_entry: value[0]}
    if not value and not isinstance(key_or_entry, Mapping):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    out = dict(mapping)
    for key, item in entries.items():
        if map_lookup(out, key)[0]:
            raise CELEvalError(f"insert failed: key {key} already exists")
        out[key] = item
    return out


def to_string(value: Any) -> str:
    return convert("string", value)  # type: ignore[no-any-return]


def to_bool(value: Any) -> bool:
    return convert("bool", value)  # type: ignore[no-any-return]


def to_timestamp(value: Any) -> Any:
    return convert("timestamp", value)


def regex_matches(text: Any, pattern: Any) -> bool:
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    return matches(text, pattern)


def convert_value(function: str, value: Any) -> Any:
    """A conversion by name, with cel-go's rules (policies.cel.conversions)."""
    return convert(function, value)


def _zone(name: Any) -> datetime.tzinfo:
    """cel-go's timeZone(): an IANA name, or a numeric offset such as "+05:30" / "-08:00"."""
    if not isinstance(name, str):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    colon = name.find(":")
    if colon == -1:
        try:
            return zoneinfo.ZoneInfo(name) if name not in ("", "UTC") else datetime.UTC
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise CELEvalError(f"unknown time zone {name}") from None
    hours_text, minutes_text = name[:colon], name[colon + 1 :]
    try:
        hours, minutes = int(hours_text), int(minutes_text)
    except ValueError:
        bad = hours_text if not hours_text.lstrip("+-").isdigit() else minutes_text
        raise CELEvalError(f'strconv.Atoi: parsing "{bad}": invalid syntax') from None
    offset = hours * 60 - minutes if name.startswith("-") else hours * 60 + minutes
    return datetime.timezone(datetime.timedelta(minutes=offset))


def time_getter(name: str, value: Any, zone: Any) -> int:
    """``timestamp.getX(tz)`` (cel-go common/stdlib): the field in the given time zone. Months, days
    of the month and days of the year count from 0, ``getDate`` from 1, weekdays from Sunday = 0."""
    if not isinstance(value, datetime.datetime):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    local = value.astimezone(_zone(zone))
    getters = {
        "getFullYear": lambda: local.year,
        "getMonth": lambda: local.month - 1,
        "getDayOfYear": lambda: local.timetuple().tm_yday - 1,
        "getDayOfMonth": lambda: local.day - 1,
        "getDate": lambda: local.day,
        "getDayOfWeek": lambda: (local.weekday() + 1) % 7,
        "getHours": lambda: local.hour,
        "getMinutes": lambda: local.minute,
        "getSeconds": lambda: local.second,
        "getMilliseconds": lambda: local.microsecond // 1000,
    }
    return int(getters[name]())


def divide(a: Any, b: Any) -> Any:
    """``a / b`` with cel-go's rules: doubles by IEEE 754 (x / 0.0 is +-Inf or NaN), integers
    truncated toward zero with division by zero and overflow as errors."""
    if isinstance(a, float) and isinstance(b, float):
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    if isinstance(a, UInt) != isinstance(b, UInt):
        raise CELEvalError(NO_SUCH_OVERLOAD)
    if b == 0:
        raise CELEvalError("division by zero")
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    if isinstance(a, UInt):
        return UInt(quotient)
    if not -(1 << 63) <= quotient < (1 << 63):
        raise CELEvalError("integer overflow")
    return quotient
