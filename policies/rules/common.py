"""Small pieces several rules share, so their messages name objects and lists the same way."""

from __future__ import annotations

from collections.abc import Sequence

from policies.api.base import TypedObject

# How many items (devices, claims) a message lists before it says "and N more": enough to act on,
# short enough for a kubectl warning line.
LISTED = 3


def object_key(obj: TypedObject) -> str:
    """``namespace/name`` (or ``name``); an object created with generateName shows ``prefix*``,
    because on CREATE the API server has not picked the name yet."""
    name = obj.name or f"{obj.metadata.generate_name or ''}*"
    return f"{obj.namespace}/{name}" if obj.namespace else name


def a_few(items: Sequence[str], limit: int = LISTED) -> str:
    """``a, b, c`` or ``a, b, c and 2 more``."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown
