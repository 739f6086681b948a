"""The Kubernetes Semver library, version 1 (``library/semverlib.go``), over blang/semver v4.

``semver(s)`` parses strictly (``semver.Parse``); ``semver(s, true)`` first normalizes: drops one
leading ``v``, strips leading zeros from the first three dot-separated parts and fills a missing
minor/patch with 0 (``normalizeAndParse``, which unlike ``ParseTolerant`` keeps surrounding
whitespace). Error texts are blang's. ``major()``/``minor()``/``patch()`` return the uint64 part
reinterpreted as int64, as Go's ``types.Int(v.Major)`` does.
"""

from __future__ import annotations

from policies.cel.library.cost import fixed, parse_traversal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gofmt import go_quote
from policies.cel.library.overload import Overload
from policies.cel.library.values import UINT64_MAX, Semver

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")


def _parse_uint(text: str) -> int:
    """strconv.ParseUint(text, 10, 64) with its error texts."""
    if not text or not set(text) <= _NUMBERS:
        raise CELEvalError(f"strconv.ParseUint: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if value > UINT64_MAX:
        raise CELEvalError(f"strconv.ParseUint: parsing {go_quote(text)}: value out of range")
    return value


def _number_part(text: str, what: str) -> int:
    if not set(text) <= _NUMBERS:
        raise CELEvalError(f"Invalid character(s) found in {what} number {go_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise CELEvalError(f"{what.capitalize()} number must not contain leading zeroes {go_quote(text)}")
    return _parse_uint(text)


def _prerelease(text: str) -> int | str:
    if not text:
        raise CELEvalError("Prerelease is empty")
    if set(text) <= _NUMBERS:
        if len(text) > 1 and text[0] == "0":
            raise CELEvalError(f"Numeric PreRelease version must not contain leading zeroes {go_quote(text)}")
        return _parse_uint(text)
    if set(text) <= _ALPHANUM:
        return text
    raise CELEvalError(f"Invalid character(s) found in prerelease {go_quote(text)}")


def parse_semver(text: str) -> Semver:
    """blang/semver v4 ``Parse`` (strict semver 2.0.0)."""
    if not text:
        raise CELEvalError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise CELEvalError("No Major.Minor.Patch elements found")
    major = _number_part(parts[0], "major")
    minor = _number_part(parts[1], "minor")
    rest, _, build_text = parts[2].partition("+")
    build = tuple(build_text.split(".")) if "+" in parts[2] else ()
    patch_text, _, pre_text = rest.partition("-")
    pre_parts = pre_text.split(".") if "-" in rest else []
    patch = _number_part(patch_text, "patch")
    pre = tuple(_prerelease(p) for p in pre_parts)
    for item in build:
        if not item:
            raise CELEvalError("Build meta data is empty")
        if not set(item) <= _ALPHANUM:
            raise CELEvalError(f"Invalid character(s) found in build meta data {go_quote(item)}")
    return Semver(major, minor, patch, pre, build)


def parse_semver_normalized(text: str) -> Semver:
    """``normalizeAndParse`` from semverlib.go."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            trimmed = part.lstrip("0")
            if not trimmed or trimmed[0] not in _NUMBERS:
                trimmed = "0" + trimmed
            parts[i] = trimmed
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise CELEvalError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def semver(text: str, normalize: bool = False) -> Semver:
    return parse_semver_normalized(text) if normalize else parse_semver(text)


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        semver(text, normalize)
    except CELEvalError:
        return False
    return True


def _as_int64(value: int) -> int:
    """Go's int64(uint64): values past 2^63-1 wrap to negative."""
    return value - (1 << 64) if value >= 1 << 63 else value


S = "Semver"
_NOMINAL = fixed(1)
_PARSE = parse_traversal(0)

OVERLOADS: tuple[Overload, ...] = (
    Overload("semver", "string_to_semver", False, ("string",), S, semver, _PARSE),
    Overload("semver", "string_bool_to_semver", False, ("string", "bool"), S, semver, _PARSE),
    Overload("isSemver", "is_semver_string", False, ("string",), "bool", is_semver, _PARSE),
    Overload("isSemver", "is_semver_string_bool", False, ("string", "bool"), "bool", is_semver, _PARSE),
    Overload(
        "isGreaterThan",
        "semver_is_greater_than",
        True,
        (S, S),
        "bool",
        lambda a, b: a.compare(b) == 1,
        _NOMINAL,
    ),
    Overload(
        "isLessThan", "semver_is_less_than", True, (S, S), "bool", lambda a, b: a.compare(b) == -1, _NOMINAL
    ),
    Overload("compareTo", "semver_compare_to", True, (S, S), "int", Semver.compare, _NOMINAL),
    Overload("major", "semver_major", True, (S,), "int", lambda v: _as_int64(v.major), _NOMINAL),
    Overload("minor", "semver_minor", True, (S,), "int", lambda v: _as_int64(v.minor), _NOMINAL),
    Overload("patch", "semver_patch", True, (S,), "int", lambda v: _as_int64(v.patch), _NOMINAL),
)
