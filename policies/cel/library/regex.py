"""RE2 regular expressions as cel-go and the Kubernetes Regex library use them.

cel-go's ``matches`` and Kubernetes' ``find``/``findAll`` (``library/regex.go``) compile with Go's
``regexp`` package, an RE2 implementation. This module runs patterns on Google's RE2 (the ``re2``
module) and turns its errors into Go's wording (``error parsing regexp: missing closing ): `(a```).
RE2 semantics that Python's ``re`` lacks come for free: ``\\w \\d \\s \\b`` are ASCII-only, ``$``
only matches at the very end, ``a{,3}`` is literal, lookarounds, backreferences and ``\\Z`` are
errors, repeat counts above 1000 are errors, ``\\pL``, ``[[:alpha:]]``, ``\\Q..\\E``, ``(?U)`` and
named groups work. Go rejects ``\\C`` (any byte), which C++ RE2 accepts; that is checked here.
Lookbehinds read as named groups to Go 1.22+ (the Go Kubernetes 1.36 is built with), so
``(?<!a)`` is "invalid named capture" there; older Go said "invalid or unsupported Perl syntax".

``findAll`` follows Go's ``FindAllString``: an empty match right after the previous match is
skipped, which differs from Python's ``finditer``.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

from policies.cel.library.cost import REGEX
from policies.cel.library.errors import CELEvalError
from policies.cel.library.overload import Overload

# C++ RE2 error text -> Go regexp/syntax ErrorCode text.
_GO_CODES = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid named capture group": "invalid named capture",
    "invalid UTF-8": "invalid UTF-8",
    "pattern too large - compile failed": "expression too large",
}


class RegexError(CELEvalError):
    """A pattern Go's regexp.Compile rejects; ``str()`` is Go's ``*syntax.Error`` text."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


_OPTIONS = _options()


def _go_error(pattern: str, message: str) -> RegexError:
    code, _, arg = message.partition(": ")
    if code == "invalid perl operator" and arg.startswith("(?<"):
        return _named_capture_error(pattern, arg)
    go_code = _GO_CODES.get(code, code)
    return RegexError(f"error parsing regexp: {go_code}: `{arg}`")


def _named_capture_error(pattern: str, arg: str) -> RegexError:
    """Go reads ``(?<`` as the start of a named group (lookbehind is unknown to it), so it
    complains about the group name: up to the next ``>``, or the rest of the pattern."""
    rest = pattern[pattern.find(arg) :]
    end = rest.find(">")
    shown = rest if end < 0 else rest[: end + 1]
    return RegexError(f"error parsing regexp: invalid named capture: `{shown}`")


def _unescaped_capital_c(pattern: str) -> bool:
    """Whether the pattern uses ``\\C`` outside ``\\Q...\\E`` (Go: invalid escape sequence)."""
    i, quoted = 0, False
    while i < len(pattern):
        if pattern.startswith("\\E", i) and quoted:
            quoted, i = False, i + 2
        elif quoted:
            i += 1
        elif pattern.startswith("\\Q", i):
            quoted, i = True, i + 2
        elif pattern[i] == "\\":
            if pattern.startswith("\\C", i):
                return True
            i += 2
        else:
            i += 1
    return False


@functools.lru_cache(maxsize=512)
def compile_regex(pattern: str) -> Any:
    """Compile like Go's regexp.Compile; raise ``RegexError`` with Go's message on bad syntax.

    The checker calls this for literal patterns (cel-go rejects them at compile time); the
    functions below call it at run time for patterns that come from data.
    """
    if _unescaped_capital_c(pattern):
        raise RegexError("error parsing regexp: invalid escape sequence: `\\C`")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as err:
        raw = err.args[0] if err.args else ""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise _go_error(pattern, text) from None


def matches(text: str, pattern: str) -> bool:
    """cel-go ``matches``: an unanchored search; bad patterns fail with Go's error text."""
    return compile_regex(pattern).search(text) is not None


def _illegal(pattern: str) -> Any:
    try:
        return compile_regex(pattern)
    except RegexError as err:
        raise CELEvalError(f"Illegal regex: {err}") from None


def find(text: str, pattern: str) -> str:
    match = _illegal(pattern).search(text)
    return "" if match is None else str(match.group(0))


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString(text, limit): successive non-overlapping matches, at most ``limit``
    (all when negative); an empty match adjacent to the previous match is not reported."""
    compiled = _illegal(pattern)
    if limit < 0:
        limit = len(text) + 1
    out: list[str] = []
    pos, previous_end = 0, -1
    while len(out) < limit and pos <= len(text):
        match = compiled.search(text, pos)
        if match is None:
            break
        start, end = match.span()
        accept = True
        if end == start:
            accept = start != previous_end
            pos = end + 1
        else:
            pos = end
        previous_end = end
        if accept:
            out.append(str(match.group(0)))
    return out


OVERLOADS: tuple[Overload, ...] = (
    Overload("find", "string_find_string", True, ("string", "string"), "string", find, REGEX),
    Overload(
        "findAll", "string_find_all_string", True, ("string", "string"), "list(string)", find_all, REGEX
    ),
    Overload(
        "findAll",
        "string_find_all_string_int",
        True,
        ("string", "string", "int"),
        "list(string)",
        find_all,
        REGEX,
    ),
)
