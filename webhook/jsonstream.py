"""A JSON document read piece by piece: the items of a huge ``kind: List`` one at a time.

``kubectl get pods -A -o json`` of a 100,000-pod cluster is 450 MB of JSON, some 4 GB once parsed
whole. :func:`stream` reads the file in chunks and yields the top-level object's members one by
one, and an ``items`` array item by item, each parsed with the standard library's decoder
(``raw_decode``) as soon as its text is complete, so that at any time one chunk and one item are
held. A document that is not an object at the top is parsed whole.

Errors are :class:`StreamError`, a :class:`json.JSONDecodeError` with the line and column in the
file, as ``json.loads`` gives them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO

CHUNK = 1 << 20
# No Kubernetes object comes near this (etcd stores at most 1.5 MiB): a value still incomplete after
# this much text is broken, not cut by the end of a chunk.
MAX_VALUE = 64 << 20
_WHITESPACE = " \t\n\r"
_NUMBER = frozenset("0123456789.eE+-")


class StreamError(json.JSONDecodeError):
    """A JSON syntax error at ``lineno``/``colno`` of the file (``doc`` and ``pos`` are not kept)."""

    def __init__(self, msg: str, line: int, column: int) -> None:
        ValueError.__init__(self, f"{msg}: line {line} column {column}")
        self.msg, self.doc, self.pos, self.lineno, self.colno = msg, "", 0, line, column

Member = tuple[str, Any]
"""A member of the top-level object: ``(key, value)``; an ``items`` array gives ``("items[]", item)``
for each of its items (an empty one gives ``("items", [])``)."""


class _Buffer:
    """The text read so far, less what was consumed, and where in the file it starts."""

    def __init__(self, source: TextIO, decoder: json.JSONDecoder) -> None:
        self.source = source
        self.decoder = decoder
        self.text = source.read(CHUNK)
        self.pos = 0
        self.line = 1  # of text[0] in the file
        self.column = 1  # of text[0] on its line
        self.ended = not self.text

    def more(self) -> bool:
        """Read another chunk; False at the end of the file."""
        if self.ended:
            return False
        chunk = self.source.read(CHUNK)
        if not chunk:
            self.ended = True
            return False
        if self.pos > CHUNK:  # drop what was consumed, so the buffer stays about a chunk long
            self.line, self.column = self.where(self.pos)
            self.text, self.pos = self.text[self.pos :], 0
        self.text += chunk
        return True

    def where(self, pos: int) -> tuple[int, int]:
        """Line and column in the file of ``text[pos]``."""
        newlines = self.text.count("\n", 0, pos)
        if not newlines:
            return self.line, self.column + pos
        return self.line + newlines, pos - self.text.rfind("\n", 0, pos)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text) or not self.more():
                return self.text[self.pos : self.pos + 1]

    def expect(self, chars: str) -> str:
        found = self.peek()
        if not found or found not in chars:
            self.fail(f"Expecting {' or '.join(repr(c) for c in chars)} delimiter", self.pos)
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next JSON value, reading more of the file while its text is incomplete."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as err:
                if len(self.text) - self.pos < MAX_VALUE and self.more():
                    continue  # most likely cut by the end of the chunk: try again with more
                self.fail(err.msg, err.pos)
            if isinstance(value, int | float) and self._may_go_on(end) and self.more():
                continue  # a number may go on in the next chunk ("12" of "123", "12." of "12.5")
            self.pos = end
            return value

    def _may_go_on(self, end: int) -> bool:
        """Whether the text from ``end`` to the end of the buffer could be the rest of a number."""
        return all(c in _NUMBER for c in self.text[end:])

    def fail(self, message: str, pos: int) -> NoReturn:
        raise StreamError(message, *self.where(pos))


def stream(
    source: TextIO, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
) -> Iterator[Member]:
    """The members of the JSON object in ``source``, an ``items`` array item by item; a document
    that is not an object is one member ``("", value)``."""
    buffer = _Buffer(source, json.JSONDecoder(object_pairs_hook=object_pairs_hook))
    if buffer.peek() != "{":
        yield "", buffer.value()
        _end(buffer)
        return
    buffer.expect("{")
    if buffer.peek() == "}":
        buffer.pos += 1
    else:
        while True:
            if buffer.peek() != '"':
                buffer.fail("Expecting property name enclosed in double quotes", buffer.pos)
            key = buffer.value()
            buffer.expect(":")
            if key == "items" and buffer.peek() == "[":
                yield from _items(buffer)
            else:
                yield key, buffer.value()
            if buffer.expect(",}") == "}":
                break
    _end(buffer)


def _items(buffer: _Buffer) -> Iterator[Member]:
    buffer.expect("[")
    if buffer.peek() == "]":
        buffer.pos += 1
        yield "items", []
        return
    while True:
        yield "items[]", buffer.value()
        if buffer.expect(",]") == "]":
            return


def _end(buffer: _Buffer) -> None:
    if buffer.peek():
        buffer.fail("Extra data", buffer.pos)
