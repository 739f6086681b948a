"""Plain-text tables for the CLI: columns padded to their widest cell, the last one left free.

The last column holds free text (a reason, a message) that may be long; padding it would only add
trailing blanks.
"""

from __future__ import annotations

from collections.abc import Sequence


def render(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` (the header first) as aligned lines."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]]).rstrip()
        for row in rows
    )
