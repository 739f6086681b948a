"""Go's text conversions that cel-go's output depends on, done the Go way in Python.

``go_quote`` is ``strconv.Quote`` (used in error messages and ``%s`` of strings inside lists);
``go_format_g`` is ``strconv.FormatFloat(f, 'g', -1, 64)``, which is how cel-go turns a double
into a string (``1e+06``, ``123456``, ``+Inf``); ``go_fixed`` is ``fmt.Sprintf("%.<n>f")``.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """strconv.Quote: printable runes stay, the rest become Go escapes (lower-case hex)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        else:
            out.append(_rune_escape(ord(ch)))
    out.append('"')
    return "".join(out)


def _rune_escape(code: int) -> str:
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate is not valid UTF-8: Go prints U+FFFD's bytes
        return "\\ufffd"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits of |value| and the decimal point position (Go's digs.dp)."""
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(str(d) for d in digits).rstrip("0") or "0"
    point = len(digits) + int(exponent)
    if text == "0":
        point = 1
    return text, point


def go_format_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    digits, point = _shortest_digits(value)
    exponent = point - 1
    if exponent < -4 or exponent >= 6:  # shortest formatting decides with precision 6
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _place_point(digits, point)


def go_format_f_shortest(value: float) -> str:
    """strconv.FormatFloat(value, 'f', -1, 64): shortest digits, never an exponent."""
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    digits, point = _shortest_digits(value)
    return sign + _place_point(digits, point)


def _place_point(digits: str, point: int) -> str:
    if point <= 0:
        return f"0.{'0' * -point}{digits}"
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def go_fixed(value: float, precision: int) -> str:
    """fmt.Sprintf("%.<precision>f", value), including Go's spelling of NaN and infinities."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.{precision}f}"


def go_duration(value: datetime.timedelta) -> str:
    """time.Duration.String(): ``1h0m1s``, ``1.5s``, ``1.5ms``, ``0s``."""
    nanos = (value.days * 86_400 + value.seconds) * 10**9 + value.microseconds * 1_000
    sign, nanos = ("-" if nanos < 0 else ""), abs(nanos)
    if nanos == 0:
        return "0s"
    if nanos < 10**9:
        for unit, scale in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if nanos >= scale:
                return sign + _decimal(nanos, scale) + unit
    seconds, text = divmod(nanos, 10**9)[0], _decimal(nanos % (60 * 10**9), 10**9) + "s"
    minutes, hours = seconds // 60 % 60, seconds // 3600
    if seconds >= 60:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(amount: int, scale: int) -> str:
    """``amount / scale`` with the fraction's trailing zeros (and a bare point) dropped."""
    whole, fraction = divmod(amount, scale)
    digits = str(fraction).rjust(len(str(scale)) - 1, "0").rstrip("0") if scale > 1 else ""
    return f"{whole}.{digits}" if digits else str(whole)


def go_time(value: datetime.datetime) -> str:
    """time.Time.String() of a UTC time: ``2020-01-01 00:00:00.5 +0000 UTC``."""
    utc = value.astimezone(datetime.UTC)
    fraction = _decimal(utc.microsecond, 10**6)[1:]  # "" or ".5"
    return utc.strftime("%Y-%m-%d %H:%M:%S") + fraction + " +0000 UTC"
