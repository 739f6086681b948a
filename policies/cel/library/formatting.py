"""``<string>.format(<list>)`` from cel-go's Strings extension, version 1 formatter (``ext/formatting.go``).

Kubernetes pins the strings library at version 2, so ``format`` is the locale-aware (en_US)
formatter, quirks included:

* ``%f`` goes through golang.org/x/text's printer: thousands separators (``1,234.500000``), ``∞``;
* ``%e`` passes the precision as a *width* (``"%%%de"``), so precision is ignored, the mantissa always
  has 6 decimals, and short results are left-padded to that width: ``1.234500`` U+00D7 ``10⁰³``
  (no spaces around the multiplication sign with the x/text Kubernetes 1.36 vendors), and
  ``"[%e]"`` of Infinity is ``[     ∞]``;
* ``%f`` and ``%e`` print negative zero without its sign (``string(-0.0)`` and ``%s`` keep it: ``-0``);
* ``%s`` of a list or map prints a CEL-literal-like form: doubles as ``1.500000``, strings quoted;
* arguments that are not used are ignored at run time; ``%d`` takes only int/uint.

Compile-time checking of literal format strings (``stringFormatValidator``) is ``format_static_error``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.cel.library.equality import cel_type_name, is_number
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gofmt import go_fixed, go_format_f_shortest, go_format_g, go_quote
from policies.cel.library.overload import Overload

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_SPECIAL_FLOAT_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_STRING_CLAUSE_TYPES = (
    "string",
    "bool",
    "bytes",
    "int",
    "uint",
    "double",
    "list",
    "map",
    "type",
    "null_type",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
)


class _FormatError(Exception):
    """A clause that cannot format its argument (the message becomes "error during formatting: ...")."""


_CLAUSE_MESSAGES = {
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
    "durations, and timestamps",
    "d": "decimal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "o": "octal clause can only be used on integers",
}


def _clause_error(verb: str, type_name: str) -> _FormatError:
    return _FormatError(f"{_CLAUSE_MESSAGES[verb.lower()]}, was given {type_name}")


def _duration_string(value: datetime.timedelta) -> str:
    """cel-go's duration to string: seconds as strconv.FormatFloat(s, 'f', -1, 64), then "s"."""
    return go_format_f_shortest(value.total_seconds()) + "s"


def _timestamp_string(value: datetime.datetime) -> str:
    """RFC 3339 with nanoseconds trimmed, in UTC (Go's time.RFC3339Nano)."""
    utc = value.astimezone(datetime.UTC)
    fraction = f".{utc.microsecond:06d}".rstrip("0").rstrip(".")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def format_string(value: Any) -> str:
    """The ``%s`` clause (FormatString)."""
    if isinstance(value, list | tuple):
        return _format_list(value)
    if isinstance(value, Mapping):
        return _format_map(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return go_format_g(value) if isinstance(value, float) else str(int(value))
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise _FormatError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, datetime.timedelta):
        return _duration_string(value)
    if isinstance(value, datetime.datetime):
        return _timestamp_string(value)
    raise _clause_error("s", cel_type_name(value))


def _element(value: Any) -> str:
    """One list element or map value: clauseForType then quoteForCEL."""
    if isinstance(value, float):
        text = go_fixed(value, 6)
        return go_quote(text) if math.isnan(value) or math.isinf(value) else text
    if isinstance(value, datetime.timedelta):
        return f"duration({go_quote(_duration_string(value))})"
    if isinstance(value, datetime.datetime):
        return f"timestamp({go_quote(_timestamp_string(value))})"
    if not (value is None or isinstance(value, bool | int | str | bytes | list | tuple | Mapping)):
        raise _FormatError(f"no formatting function for {cel_type_name(value)}")
    text = format_string(value)
    if isinstance(value, str):
        return go_quote(text)
    if isinstance(value, bytes):
        return "b" + go_quote(text)
    return text


def _format_list(items: Sequence[Any]) -> str:
    return "[" + ", ".join(_element(item) for item in items) + "]"


def _format_map(mapping: Mapping[Any, Any]) -> str:
    pairs = []
    for key, value in mapping.items():
        if not isinstance(key, str | bool | int):
            raise _FormatError(f"no formatting function for map key of type {cel_type_name(key)}")
        pairs.append((_element(key), _element(value)))
    pairs.sort(key=lambda pair: pair[0].encode("utf-8"))
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _decimal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(int(value))
    raise _clause_error("d", cel_type_name(value))


def _as_float(value: Any, verb: str) -> float:
    """The double a ``%f``/``%e`` clause prints. golang.org/x/text's number printer takes the sign
    from ``x < 0``, so negative zero prints as ``0.000000`` (a negative number that merely rounds
    to zero keeps its ``-``)."""
    if isinstance(value, float):
        return 0.0 if value == 0 else value
    if isinstance(value, str) and value in _SPECIAL_FLOAT_STRINGS:
        return _SPECIAL_FLOAT_STRINGS[value]
    raise _clause_error(verb, cel_type_name(value))


def _fixed(value: Any, precision: int) -> str:
    number = _as_float(value, "f")
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    return f"{number:,.{precision}f}"


def _scientific(value: Any, width: int) -> str:
    number = _as_float(value, "e")
    if math.isnan(number):
        text = "NaN"
    elif math.isinf(number):
        text = "∞" if number > 0 else "-∞"
    else:
        mantissa, _, exponent = f"{number:.6e}".partition("e")
        power = int(exponent)
        digits = f"{'-' if power < 0 else ''}{abs(power):02d}".translate(_SUPERSCRIPT)
        text = f"{mantissa}\u00d710{digits}"
    return text.rjust(width)


def _binary(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return format(int(value), "b")
    raise _FormatError(
        f"only integers and bools can be formatted as binary, was given {cel_type_name(value)}"
    )


def _hex(value: Any, upper: bool) -> str:
    if isinstance(value, str):
        text = value.encode("utf-8").hex()
    elif isinstance(value, bytes):
        text = value.hex()
    elif isinstance(value, int) and not isinstance(value, bool):
        text = format(int(value), "x")
    else:
        raise _clause_error("x", cel_type_name(value))
    return text.upper() if upper else text


def _octal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return format(int(value), "o")
    raise _clause_error("o", cel_type_name(value))


@dataclass(frozen=True)
class _Clause:
    verb: str
    precision: int | None
    length: int  # characters consumed after the '%'


def _parse_clause(text: str) -> _Clause:
    """parseFormattingClause: an optional ``.digits`` precision then one verb character."""
    i, precision = 0, None
    if text[0] == ".":
        i = 1
        while True:
            if i >= len(text):
                raise CELEvalError(
                    "could not parse formatting clause: error while parsing precision: "
                    "could not find end of precision specifier"
                )
            if not ("0" <= text[i] <= "9"):
                break
            i += 1
        if i == 1:
            raise CELEvalError(
                "could not parse formatting clause: error while parsing precision: error while "
                'converting precision to integer: strconv.Atoi: parsing "": invalid syntax'
            )
        precision = int(text[1:i])
    verb = text[i]
    if verb not in "sdfebxXo":
        # Go reads the clause one byte at a time: a multi-byte rune shows as its first byte.
        shown = chr(verb.encode("utf-8")[0])
        raise CELEvalError(f'could not parse formatting clause: unrecognized formatting clause "{shown}"')
    return _Clause(verb, precision, i + 1)


def _apply(clause: _Clause, value: Any) -> str:
    verb, precision = clause.verb, clause.precision
    if verb == "s":
        return format_string(value)
    if verb == "d":
        return _decimal(value)
    if verb == "f":
        return _fixed(value, 6 if precision is None else precision)
    if verb == "e":
        return _scientific(value, 6 if precision is None else precision)
    if verb == "b":
        return _binary(value)
    if verb == "o":
        return _octal(value)
    return _hex(value, upper=verb == "X")


def format_(template: str, args: Sequence[Any]) -> str:
    """parseFormatString with cel-go's order of checks and error texts."""
    out: list[str] = []
    i = arg_index = 0
    while i < len(template):
        if template[i] != "%":
            out.append(template[i])
            i += 1
            continue
        if template.startswith("%%", i):
            out.append("%")
            i += 2
            continue
        if arg_index >= len(args):
            raise CELEvalError(f"index {arg_index} out of range")
        if i + 1 >= len(template):
            raise CELEvalError("unexpected end of string")
        clause = _parse_clause(template[i + 1 :])
        try:
            out.append(_apply(clause, args[arg_index]))
        except _FormatError as err:
            raise CELEvalError(f"error during formatting: {err}") from None
        i += 1 + clause.length
        arg_index += 1
    return "".join(out)


# --- compile-time check (stringFormatValidator) ---------------------------------------------------

_CLAUSE_TYPES = {
    "d": ("int", "uint"),
    "f": ("double", "string"),
    "e": ("double", "string"),
    "b": ("int", "uint", "bool"),
    "x": ("int", "uint", "string", "bytes"),
    "X": ("int", "uint", "string", "bytes"),
    "o": ("int", "uint"),
}


@dataclass(frozen=True)
class StaticArg:
    """A literal argument of ``format``: its checked type name, and its elements when it is itself
    a list or map literal (``%s`` looks inside those)."""

    type_name: str
    elements: tuple[StaticArg, ...] = ()


def _kind(type_name: str) -> str:
    return type_name.split("(", 1)[0]


def _string_ok(arg: StaticArg) -> StaticArg | None:
    """The first (sub-)argument ``%s`` cannot print, or None."""
    if arg.type_name != "dyn" and _kind(arg.type_name) not in _STRING_CLAUSE_TYPES:
        return arg
    return next((bad for bad in map(_string_ok, arg.elements) if bad is not None), None)


def _typed_ok(arg: StaticArg, verb: str) -> StaticArg | None:
    if arg.type_name == "dyn" or _kind(arg.type_name) in _CLAUSE_TYPES[verb]:
        return None
    return arg


def format_static_error(template: str, args: Sequence[StaticArg]) -> str | None:
    """What cel-go reports at compile time for ``'<template>'.format([<args>])``, or None.

    Checks each clause against the static type of its argument (``dyn`` always passes; note that
    the DRA attribute type ``any`` is *not* ``dyn``) and reports unused arguments.
    """
    used = 0
    i = 0
    while i < len(template):
        if template[i] != "%":
            i += 1
            continue
        if template.startswith("%%", i):
            i += 2
            continue
        if i + 1 >= len(template):
            return "unexpected end of string"
        if used >= len(args):
            return f"index {used} out of range"
        try:
            clause = _parse_clause(template[i + 1 :])
        except CELEvalError as err:
            return str(err)
        arg = args[used]
        bad = _string_ok(arg) if clause.verb == "s" else _typed_ok(arg, clause.verb)
        if bad is not None:
            return f"error during formatting: {_clause_error(clause.verb, _kind(bad.type_name))}"
        used += 1
        i += 1 + clause.length
    if len(args) > used:
        return f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
    return None


OVERLOADS: tuple[Overload, ...] = (
    Overload("format", "string_format", True, ("string", "list(dyn)"), "string", format_),
)
