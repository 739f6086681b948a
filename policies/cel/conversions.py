"""cel-go's type conversion functions (``int()``, ``uint()``, ``double()``, ``string()``, ``bool()``,
``bytes()``, ``timestamp()``, ``duration()``) over plain Python values.

They serve three purposes: folding conversions of literals at compile time, as cel-go's planner
does (so ``int("x")`` fails to compile even in an untaken branch); evaluating conversions where an
engine's own differs from cel-go (``string(1e6)`` is ``1e+06`` in Go); and validating duration and
timestamp literals. Error texts are Go's (``strconv.ParseInt: parsing "x": invalid syntax``).
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Callable
from typing import Any

from policies.cel.library import CELEvalError, UInt
from policies.cel.library.gofmt import go_quote

INT64_MIN, INT64_MAX, UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# cel-go's timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300799


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def to_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str | datetime.datetime):
        raise CELEvalError("no such overload")
    if isinstance(value, float):
        if math.isnan(value) or value <= -(2.0**63) or value >= 2.0**63:
            raise CELEvalError("integer overflow")
        return int(value)
    if isinstance(value, str):
        return _parse_int(value, "strconv.ParseInt", INT64_MIN, INT64_MAX)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(seconds=1)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CELEvalError("integer overflow")
    return int(value)


def to_uint(value: Any) -> UInt:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CELEvalError("no such overload")
    if isinstance(value, float):
        if math.isnan(value) or value < 0 or value >= 2.0**64:
            raise CELEvalError("unsigned integer overflow")
        return UInt(int(value))
    if isinstance(value, str):
        return UInt(_parse_int(value, "strconv.ParseUint", 0, UINT64_MAX))
    if not 0 <= value <= UINT64_MAX:
        raise CELEvalError("unsigned integer overflow")
    return UInt(value)


def _parse_int(text: str, fn: str, low: int, high: int) -> int:
    """strconv.ParseInt/ParseUint in base 10 (ParseUint takes no sign)."""
    pattern = r"[+-]?[0-9]+" if fn == "strconv.ParseInt" else r"[0-9]+"
    if not re.fullmatch(pattern, text):
        raise CELEvalError(f"{fn}: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not low <= value <= high:
        raise CELEvalError(f"{fn}: parsing {go_quote(text)}: value out of range")
    return value


_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9](?:_?[0-9])*)?\.?[0-9]*(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def to_double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CELEvalError("no such overload")
    if isinstance(value, str):
        if not value or not _GO_FLOAT.fullmatch(value) or value.strip("+-.eE") == "" or "_" in value:
            raise CELEvalError(f"strconv.ParseFloat: parsing {go_quote(value)}: invalid syntax")
        try:
            result = float(value)
        except ValueError:
            raise CELEvalError(f"strconv.ParseFloat: parsing {go_quote(value)}: invalid syntax") from None
        if math.isinf(result) and "inf" not in value.lower():
            raise CELEvalError(f"strconv.ParseFloat: parsing {go_quote(value)}: value out of range")
        return result
    return float(value)


def format_double(value: float) -> str:
    """Go's ``fmt.Sprintf("%g", f)``, which cel-go's string(double) uses: the shortest digits that
    round-trip, in exponent form below 1e-4 or from 1e6 on, the exponent padded to two digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    parts = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, parts.digits))
    point = len(digits) + int(parts.exponent)  # the decimal point sits after `point` digits
    sign = "-" if value < 0 else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'+' if exp10 >= 0 else '-'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return format_double(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise CELEvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, datetime.datetime):
        return format_timestamp(value)
    if isinstance(value, datetime.timedelta):
        return format_duration(value)
    raise CELEvalError("no such overload")


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if value in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise CELEvalError(f"strconv.ParseBool: parsing {go_quote(value)}: invalid syntax")
    raise CELEvalError("no such overload")


def to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise CELEvalError("no such overload")


# --- timestamps and durations ------------------------------------------------------------------------

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def to_timestamp(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not _MIN_SECONDS <= value <= _MAX_SECONDS:
            raise CELEvalError("timestamp out of range")
        return _EPOCH + datetime.timedelta(seconds=value)
    if isinstance(value, str):
        m = _RFC3339.fullmatch(value)
        if m is None:
            raise CELEvalError(f'parsing time {go_quote(value)} as "2006-01-02T15:04:05Z07:00": cannot parse')
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        micros = int((m.group(7) or "0").ljust(9, "0")[:6])
        offset = (
            0 if m.group(8) else (1 if m.group(9) == "+" else -1) * (int(m.group(10)) * 60 + int(m.group(11)))
        )
        try:
            local = datetime.datetime(
                year,
                month,
                day,
                hour,
                minute,
                second,
                micros,
                tzinfo=datetime.timezone(datetime.timedelta(minutes=offset)),
            )
        except ValueError as exc:
            raise CELEvalError(f"parsing time {go_quote(value)}: {exc}") from None
        result = local.astimezone(datetime.UTC)
        seconds = (result - _EPOCH) // datetime.timedelta(seconds=1)
        if not _MIN_SECONDS <= seconds <= _MAX_SECONDS:
            raise CELEvalError("timestamp out of range")
        return result
    raise CELEvalError("no such overload")


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_MAX_DURATION_SECONDS = 315576000000  # cel-go's +/- 10000 years


def to_duration(value: Any) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    if not isinstance(value, str):
        raise CELEvalError("no such overload")
    text = value
    sign = 1
    if text[:1] in "+-" and text:
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return datetime.timedelta(0)
    pos = 0
    seconds = 0.0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None or m.group(1) in ("", "."):
            raise CELEvalError(f"time: invalid duration {go_quote(value)}")
        seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not text or abs(seconds) > _MAX_DURATION_SECONDS:
        raise CELEvalError(f"time: invalid duration {go_quote(value)}")
    return datetime.timedelta(seconds=sign * seconds)


def format_timestamp(value: datetime.datetime) -> str:
    utc = value.astimezone(datetime.UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += ("." + f"{utc.microsecond:06d}").rstrip("0")
    return text + "Z"


def format_duration(value: datetime.timedelta) -> str:
    return format_double(value.total_seconds()) + "s"


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": to_int,
    "uint": to_uint,
    "double": to_double,
    "string": to_string,
    "bool": to_bool,
    "bytes": to_bytes,
    "timestamp": to_timestamp,
    "duration": to_duration,
}


def convert(function: str, value: Any) -> Any:
    """Apply conversion ``function`` (``int``, ``string``...) with cel-go's rules."""
    return _CONVERTERS[function](value)


def fold_conversion(function: str, value: Any, kind: str) -> str | None:
    """The error a conversion of the literal ``value`` (of CEL kind ``kind``) would raise, or None."""
    if function not in _CONVERTERS:
        return None
    if kind == "uint":
        value = UInt(int(value))
    try:
        convert(function, value)
    except CELEvalError as exc:
        return str(exc)
    return None
