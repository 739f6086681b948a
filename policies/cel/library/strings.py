"""cel-go's Strings extension at version 2 (``ext/strings.go``), as Kubernetes enables it.

Indices count Unicode code points (Go runes). The edge cases are cel-go's: ``charAt(len)`` is
``""``; ``indexOf("", n)`` / ``lastIndexOf("", n)`` return ``n`` whatever ``n`` is; a search start
outside ``[0, len)`` is "index out of range"; ``trim`` removes Go's ``unicode.IsSpace`` runes (not
zero-width ones, not the ASCII separators 0x1c-0x1f that Python's ``strip`` removes); ``split`` and
``replace`` with an empty separator work rune by rune. ``format`` lives in ``formatting``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.cel.library.cost import JOIN, STRING_SCAN, traversal
from policies.cel.library.equality import cel_type_name
from policies.cel.library.errors import CELEvalError
from policies.cel.library.overload import Overload

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


def index_of(text: str, sub: str, offset: int = 0) -> int:
    if sub == "":
        return offset
    if offset < 0 or offset >= len(text):
        raise _out_of_range(offset)
    return text.find(sub, offset)


def last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        if sub == "":
            return len(text)
        offset = len(text) - 1
    if sub == "":
        return offset
    if offset < 0 or offset >= len(text):
        raise _out_of_range(offset)
    return text.rfind(sub, 0, offset + len(sub))


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
    """list(string).join: a list(dyn) holding a non-string fails the way ConvertToNative does."""
    for item in items:
        if not isinstance(item, str):
            raise CELEvalError(f"type conversion error from '{cel_type_name(item)}' to 'string'")
    return separator.join(items)


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
