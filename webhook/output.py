"""What the commands print for a person, and the two formats they print for programs.

For a person: tables that keep one line per row (a cell's extra lines, and on a terminal the part
of the last column that does not fit, are cut, and a note says where the full text is), counted
nouns ("1 object", "2 objects"), colour on a terminal, and a progress bar on stderr for runs long enough to
need one. For programs: ``-o json`` and ``-o yaml``, always in full. Nothing here decides anything;
the commands hand over rows and documents.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

# On a terminal the last column keeps at least this much, even when the others fill the line;
# they are cut to make room for it, each down to MIN_COLUMN.
MIN_LAST_COLUMN = 30
MIN_COLUMN = 8
CUT = "..."
CUT_NOTE = "note: long text was cut to one line; -o json or -o yaml shows it in full"

# Status words that a table cell may hold in full, and their colour (ANSI SGR codes).
RED, GREEN, YELLOW, BOLD = "31", "32", "33", "1"
STATUS_COLORS = {
    "yes": GREEN,
    "pass": GREEN,
    "valid": GREEN,
    "no": RED,
    "fail": RED,
    "FAIL": RED,
    "error": RED,
    "invalid": RED,
    "warn": YELLOW,
    "warning": YELLOW,
}


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 object``, ``0 objects``, ``2 objects``; ``nouns`` for the irregular ones."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def color_wanted(stream: TextIO, no_color: bool) -> bool:
    """Colour only on a terminal, never with ``--no-color`` or a non-empty ``NO_COLOR`` (no-color.org),
    nor on a terminal that says it cannot (``TERM=dumb``)."""
    if no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class Style:
    """Colours text when ``enabled``; otherwise returns it as is, so callers never branch."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled and text else text

    def status(self, text: str) -> str:
        """A cell that is one status word (``fail``, ``yes``, ``warn``...) in its colour."""
        code = STATUS_COLORS.get(text)
        return self.paint(text, code) if code else text


PLAIN = Style(False)


def style_for(stream: TextIO, no_color: bool) -> Style:
    return Style(color_wanted(stream, no_color))


def terminal_width(stream: TextIO) -> int | None:
    """The width to fit a table into: the terminal's (``COLUMNS`` first), None off a terminal."""
    return shutil.get_terminal_size().columns if stream.isatty() else None


def one_line(text: str) -> tuple[str, bool]:
    """The first non-empty line of ``text`` and whether anything was left out (a CEL error's
    expression and caret lines, a multi-line message)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return (lines[0] if lines else ""), False
    return f"{lines[0]} {CUT}", True


def cut(text: str, width: int | None) -> tuple[str, bool]:
    """``text`` in at most ``width`` characters (None: any), ``...`` marking a cut."""
    if width is None or len(text) <= width:
        return text, False
    return text[: max(width - len(CUT), 0)].rstrip() + CUT, True


class Table:
    """Rows under a header, columns padded to their widest cell and the last one left free.

    Every cell is one line, and with a ``width`` every line fits in it: the last column, the free
    text (a reason, a message), is cut to what the others leave it, and when they would leave it
    less than :data:`MIN_LAST_COLUMN` the widest of them are cut first (a test's long name, a
    node's devices). Without a width (output to a file or a pipe, read with grep or less rather
    than at a glance) everything is kept whole. ``cut`` says afterwards whether anything was cut,
    for :data:`CUT_NOTE`.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.header = tuple(header)
        self.rows = [tuple(row) for row in rows]
        self.cut = False

    def render(self, width: int | None = None, style: Style = PLAIN) -> str:
        cells = [self.header, *(self._single_lines(row) for row in self.rows)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.header) - 1)]
        if width is not None:
            last = min(MIN_LAST_COLUMN, max(len(row[-1]) for row in cells))
            widths = _fitted(widths, width - last - 2 * len(widths))
        fixed = sum(widths) + 2 * len(widths)
        room = None if width is None else max(width - fixed, MIN_LAST_COLUMN)
        lines = []
        for n, row in enumerate(cells):
            shown = [self._cut(cell, w) for cell, w in zip(row, [*widths, room], strict=True)]
            paint = (lambda text: style.paint(text, BOLD)) if n == 0 else style.status
            padded = [paint(cell) + " " * (w - len(cell)) for cell, w in zip(shown[:-1], widths, strict=True)]
            lines.append("  ".join([*padded, paint(shown[-1])]).rstrip())
        return "\n".join(lines)

    def _cut(self, text: str, width: int | None) -> str:
        shown, was_cut = cut(text, width)
        self.cut |= was_cut
        return shown

    def _single_lines(self, row: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for cell in row:
            line, was_cut = one_line(cell)
            self.cut |= was_cut
            out.append(line)
        return tuple(out)


def _fitted(widths: list[int], room: int) -> list[int]:
    """``widths`` capped so that they add up to at most ``room``, the widest cut first and none
    below :data:`MIN_COLUMN` (or its own width): the widths of the columns before the last."""
    if sum(widths) <= room:
        return widths
    cap = max(widths)
    while cap > MIN_COLUMN and sum(min(w, cap) for w in widths) > room:
        cap -= 1
    return [min(w, cap) for w in widths]


def print_table(table: Table, out: TextIO, style: Style) -> None:
    """``table`` fitted to ``out``'s terminal, and the note on stderr when anything was cut."""
    print(table.render(terminal_width(out), style), file=out)
    if table.cut:
        print(CUT_NOTE, file=sys.stderr)


def dump(document: Any, fmt: str, out: TextIO) -> None:
    """``document`` as ``json`` (indented) or ``yaml`` (block style, keys in the given order)."""
    if fmt == "json":
        json.dump(document, out, indent=2)
        out.write("\n")
    else:
        dump_all([document], out)


def dump_all(documents: Sequence[Any], out: TextIO) -> None:
    """``documents`` as one YAML stream, ``---`` between them (what ``kubectl apply -f -`` reads)."""
    import yaml  # only the yaml output needs it

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when PyYAML was built with it
    out.write(yaml.dump_all(documents, Dumper=dumper, sort_keys=False))


class Progress:
    """``LABEL [#####.....] 12/40`` redrawn in place on stderr, for runs long enough to need it.

    Nothing is drawn off a terminal, nor before ``delay`` seconds have passed (a short run should
    not flicker a bar), nor more often than every ``interval`` seconds (a 50,000-item List reports
    each item, and a terminal redrawn that often slows the run down). ``close`` wipes the line so
    that what follows starts clean.
    """

    WIDTH = 30

    def __init__(
        self,
        label: str,
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        delay: float = 0.5,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._label = label
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._clock = clock
        self._start = clock()
        self._delay = delay
        self._interval = interval
        self._drawn_at: float | None = None
        self._length = 0

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled or total <= 0:
            return
        now = self._clock()
        if now - self._start < self._delay:
            return
        if self._drawn_at is not None and now - self._drawn_at < self._interval:
            return
        filled = self.WIDTH * min(done, total) // total
        line = f"{self._label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}"
        self._stream.write("\r" + line)
        self._stream.flush()
        self._drawn_at = now
        self._length = max(self._length, len(line))

    def close(self) -> None:
        if self._drawn_at is not None:
            self._stream.write("\r" + " " * self._length + "\r")
            self._stream.flush()
            self._drawn_at = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
