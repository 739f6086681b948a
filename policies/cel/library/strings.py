"""cel-go's Strings extension at version 2 (``ext/strings.go``), as Kubernetes enables it.

Indices count Unicode code points (Go runes). The edge cases are cel-go's (v0.26.0, as in
Kubernetes 1.36): ``charAt(len)`` is ``""``; ``indexOf("", n)`` / ``lastIndexOf("", n)`` return
``n`` whatever ``n`` is; a negative search start is "index out of range", one at or past the end
finds nothing (-1, so ``"".indexOf("a")`` is -1); ``join`` of a non-string element is
``join: invalid input: <element as Go's %v prints it>``; ``trim`` removes Go's ``unicode.IsSpace`` runes (not
zero-width ones, not the ASCII separators 0x1c-0x1f that Python's ``strip`` removes); ``split`` and
``replace`` with an empty separator work rune by rune. ``format`` lives in ``formatting``.
``reverse`` (version 3) is not in the Kubernetes environment.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.api.quantity import Quantity
from policies.cel.library.cost import JOIN, STRING_SCAN, traversal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gofmt import go_duration, go_format_g, go_time
from policies.cel.library.netaddr import cidr_string, ip_string
from policies.cel.library.overload import Overload
from policies.cel.library.urls import url_string
from policies.cel.library.values import CIDR, IP, URL, Optional

_GO_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _out_of_range(index: int) -> CELEvalError:
    return CELEvalError(f"index out of range: {index}")


def char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise _out_of_range(index)
    return text[index] if index < len(text) else ""


def _search_start(text: str, offset: int) -> int | None:
    """The offset a search may start from: negative is an error; at or past the end (an empty
    string included) there is nothing to find, so the search answers -1 (cel-go PR #1052)."""
    if offset < 0:
        raise _out_of_range(offset)
    return offset if offset < len(text) else None


def index_of(text: str, sub: str, offset: int = 0) -> int:
    if sub == "":
        return offset
    start = _search_start(text, offset)
    return -1 if start is None else text.find(sub, start)


def last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        if sub == "":
            return len(text)
        if text == "":
            return -1
        offset = len(text) - 1
    if sub == "":
        return offset
    start = _search_start(text, offset)
    return -1 if start is None else text.rfind(sub, 0, start + len(sub))


def lower_ascii(text: str) -> str:
    return "".join(ch.lower() if ch.isascii() else ch for ch in text)


def upper_ascii(text: str) -> str:
    return "".join(ch.upper() if ch.isascii() else ch for ch in text)


def replace(text: str, old: str, new: str, limit: int = -1) -> str:
    """strings.Replace: ``limit < 0`` replaces all; an empty ``old`` inserts around each rune."""
    return text.replace(old, new, limit if limit >= 0 else -1)


def split(text: str, separator: str, limit: int = -1) -> list[str]:
    """strings.SplitN: 0 -> [], n > 0 -> at most n parts, negative -> all parts."""
    if limit == 0:
        return []
    if separator == "":
        runes = list(text)
        if 0 < limit < len(runes):
            return [*runes[: limit - 1], "".join(runes[limit - 1 :])]
        return runes
    return text.split(separator, limit - 1 if limit > 0 else -1)


def substring(text: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(text):
            raise _out_of_range(start)
        return text[start:]
    if start > end:
        raise CELEvalError(f"invalid substring range. start: {start}, end: {end}")
    for index in (start, end):
        if index < 0 or index > len(text):
            raise _out_of_range(index)
    return text[start:end]


def trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] in _GO_SPACE:
        start += 1
    while end > start and text[end - 1] in _GO_SPACE:
        end -= 1
    return text[start:end]


def join(items: Sequence[Any], separator: str = "") -> str:
    """list(string).join at version 2 (joinValSeparator): a list(dyn) holding a non-string fails
    naming the element the way Go's ``%v`` prints it."""
    for item in items:
        if not isinstance(item, str):
            raise CELEvalError(f"join: invalid input: {_go_value(item)}")
    return separator.join(items)


_STRINGERS: tuple[tuple[type, Callable[[Any], str]], ...] = (
    (URL, url_string),
    (IP, ip_string),
    (CIDR, cidr_string),
)


def _go_value(value: Any) -> str:
    """``fmt.Sprintf("%v", v)`` of a cel-go value: ``[a, b]``, ``{k: v}``, bytes as ``[104 105]``,
    null as ``0`` (its enum number), durations and timestamps as Go's time package prints them."""
    if value is None:
        return "0"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_format_g(value)
    if isinstance(value, bytes):
        return "[" + " ".join(map(str, value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(_go_value, value)) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_go_value(k)}: {_go_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, datetime.timedelta):
        return go_duration(value)
    if isinstance(value, datetime.datetime):
        return go_time(value)
    if isinstance(value, Optional):
        return f"optional({_go_value(value.value())})" if value.has_value() else "optional.none()"
    if isinstance(value, Quantity):
        return value.canonical()
    for cls, text in _STRINGERS:
        if isinstance(value, cls):
            return text(value)
    return str(int(value)) if isinstance(value, int) else str(value)


def quote(text: str) -> str:
    """strings.quote: double-quoted, CEL escapes for \\a \\b \\f \\n \\r \\t \\v \\\\ and \\"."""
    escapes = {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
    clean = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> U+FFFD
    return '"' + "".join(escapes.get(ch, ch) for ch in clean) + '"'


S = "string"
OVERLOADS: tuple[Overload, ...] = (
    Overload("charAt", "string_char_at_int", True, (S, "int"), S, char_at),
    Overload("indexOf", "string_index_of_string", True, (S, S), "int", index_of, STRING_SCAN),
    Overload("indexOf", "string_index_of_string_int", True, (S, S, "int"), "int", index_of, STRING_SCAN),
    Overload("lastIndexOf", "string_last_index_of_string", True, (S, S), "int", last_index_of, STRING_SCAN),
    Overload(
        "lastIndexOf",
        "string_last_index_of_string_int",
        True,
        (S, S, "int"),
        "int",
        last_index_of,
        STRING_SCAN,
    ),
    Overload("lowerAscii", "string_lower_ascii", True, (S,), S, lower_ascii, traversal(0)),
    Overload("upperAscii", "string_upper_ascii", True, (S,), S, upper_ascii, traversal(0)),
    Overload("replace", "string_replace_string_string", True, (S, S, S), S, replace, traversal(0, 2)),
    Overload(
        "replace", "string_replace_string_string_int", True, (S, S, S, "int"), S, replace, traversal(0, 2)
    ),
    Overload("split", "string_split_string", True, (S, S), "list(string)", split, traversal(0, 2)),
    Overload("split", "string_split_string_int", True, (S, S, "int"), "list(string)", split, traversal(0, 2)),
    Overload("substring", "string_substring_int", True, (S, "int"), S, substring, traversal(0)),
    Overload("substring", "string_substring_int_int", True, (S, "int", "int"), S, substring, traversal(0)),
    Overload("trim", "string_trim", True, (S,), S, trim, traversal(0)),
    Overload("join", "list_join", True, ("list(string)",), S, join, JOIN),
    Overload("join", "list_join_string", True, ("list(string)", S), S, join, JOIN),
    Overload("strings.quote", "strings_quote", False, (S,), S, quote),
)
