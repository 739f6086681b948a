"""Field errors that print exactly like the API server's (apimachinery ``field.Error``).

Users compare draguard's output with what ``kubectl apply`` tells them, and scripts grep for it, so
the rendering follows ``staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go``
(1.36): ``<path>: <Type>[: <value>][: <detail>]``. Required, Forbidden, Too long and Internal
error never show the value; strings are quoted the way Go's ``%q`` quotes them; numbers and
booleans print bare. Values Go dumps with ``%#v`` (internal structs and slices) are rendered by
:mod:`policies.validation.gosyntax` where the validator knows the Go type; the remaining composite
values (whole specs shown by "field is immutable") print as compact JSON instead.
"""

from __future__ import annotations

import enum
import json
import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final


class ErrorType(enum.Enum):
    """The apimachinery error types; the value is the text kubectl prints."""

    NOT_FOUND = "Not found"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    INVALID = "Invalid value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    INTERNAL = "Internal error"
    # Not apimachinery types: strict decoding's `unknown field "spec.foo"` and `duplicate field
    # "spec.foo"` (sigs.k8s.io/json, as kubectl --validate=strict shows them).
    UNKNOWN_FIELD = "unknown field"
    DUPLICATE_FIELD = "duplicate field"


class _Omit:
    """Marker for "no value to show" (apimachinery's omitValue)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()

# Types whose value is never printed, whatever was passed.
_VALUELESS = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL}
# Strict decoding's errors: the path is inside the message.
_DECODING = {ErrorType.UNKNOWN_FIELD, ErrorType.DUPLICATE_FIELD}


class Path:
    """A field path as upstream builds it: ``spec.devices.requests[0].exactly``, map keys in ``[...]``."""

    __slots__ = ("_text",)

    def __init__(self, *names: str) -> None:
        self._text = ".".join(names)

    @classmethod
    def _of(cls, text: str) -> Path:
        path = cls()
        path._text = text
        return path

    @classmethod
    def from_text(cls, text: str) -> Path:
        """A path already written out (``spec.containers[0].name``)."""
        return cls._of(text)

    def child(self, *names: str) -> Path:
        text = self._text
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path._of(text)

    def index(self, i: int) -> Path:
        return Path._of(f"{self._text}[{i}]")

    def key(self, key: str) -> Path:
        return Path._of(f"{self._text}[{key}]")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Path({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


ROOT = Path()


@dataclass(frozen=True)
class FieldError:
    """One validation problem. ``str()`` gives the kubectl line, e.g.
    ``spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero``."""

    type: ErrorType
    field: str
    bad_value: object
    detail: str = ""

    def body(self) -> str:
        """The message without the field path (apimachinery ``ErrorBody``)."""
        if self.type in _DECODING:
            text = f"{self.type.value} {go_quote(self.field)}"
            return f"{text}: {self.detail}" if self.detail else text
        text = str(self.type.value)
        if self.type not in _VALUELESS and self.bad_value is not OMIT:
            text += f": {format_value(self.bad_value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        if self.type in _DECODING:
            return self.body()
        return f"{self.field}: {self.body()}"


ErrorList = list[FieldError]


# --- constructors, one per apimachinery helper ----------------------------------------------------


def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, str(path), "", detail)


def invalid(path: Path, value: object, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, str(path), value, detail)


def not_found(path: Path, value: object) -> FieldError:
    return FieldError(ErrorType.NOT_FOUND, str(path), value)


def duplicate(path: Path, value: object) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, str(path), value)


def not_supported(path: Path, value: object, supported: Sequence[str]) -> FieldError:
    """The supported values are listed quoted, in the order given (upstream sorts some lists)."""
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported) if supported else ""
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), value, detail)


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, str(path), "", detail)


def too_long(path: Path, max_length: int) -> FieldError:
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"may not be more than {max_length} {unit}")


def too_many(path: Path, actual: int, maximum: int) -> FieldError:
    if maximum < 0:
        return FieldError(ErrorType.TOO_MANY, str(path), actual, "has too many items")
    unit = "item" if maximum == 1 else "items"
    return FieldError(ErrorType.TOO_MANY, str(path), actual, f"must have at most {maximum} {unit}")


def internal(path: Path, message: str) -> FieldError:
    return FieldError(ErrorType.INTERNAL, str(path), None, message)


def unknown_field(path: Path, detail: str = "") -> FieldError:
    """``detail``, when given, says what to write instead (not part of the server's wording)."""
    return FieldError(ErrorType.UNKNOWN_FIELD, str(path), OMIT, detail)


def duplicate_field(path: Path) -> FieldError:
    return FieldError(ErrorType.DUPLICATE_FIELD, str(path), OMIT)


# --- Go-compatible value printing -------------------------------------------------------------------

_GO_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    "\\": r"\\",
    '"': r"\"",
}


def _printable(ch: str) -> bool:
    # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def go_quote(text: str) -> str:
    """``strconv.Quote``: what Go's ``%q`` prints for a string."""
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif _printable(ch):
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_float(value: float) -> str:
    """``%v`` of a float64: shortest digits, exponent form outside [1e-4, 1e21)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    number = Decimal(repr(value)).normalize()
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    lead = len(digits) + exponent - 1
    prefix = "-" if sign else ""
    if lead < -4 or lead >= 21:
        text = "".join(map(str, digits))
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if lead < 0 else '+'}{abs(lead):02d}"
    return prefix + format(number.copy_abs(), "f")


def format_value(value: object) -> str:
    """How a bad value appears in the message (Go ``%v``/``%q``/Stringer, JSON for composite values)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    # Anything else prints its own text unquoted, as Go prints a fmt.Stringer (device IDs, quantities).
    return str(value)


def render(errors: Iterable[FieldError]) -> list[str]:
    """One line per error, duplicates dropped as ``ErrorList.ToAggregate`` does."""
    seen: set[str] = set()
    lines = []
    for err in errors:
        line = str(err)
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines
