"""JSON Patch (RFC 6902) ``add``, ``remove`` and ``replace``: the operations draguard's mutating
rules emit, applied the way the API server applies a mutating webhook's patch before the
validating webhooks see the object.

Paths are JSON Pointers (RFC 6901): ``~1`` is ``/`` and ``~0`` is ``~`` inside a token, and ``-``
appends to an array. A patch that does not fit the document raises :class:`PatchError`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any


class PatchError(ValueError):
    """An operation that cannot be applied to the document (unknown op, missing path)."""


def apply_patch(document: Any, operations: Iterable[Mapping[str, Any]]) -> Any:
    """A patched copy of ``document``; the original is left as it was."""
    result = copy.deepcopy(document)
    for operation in operations:
        result = _apply(result, operation)
    return result


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"path {pointer!r}: a JSON Pointer starts with '/'")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _child(container: Any, token: str, pointer: str) -> Any:
    try:
        return container[int(token)] if isinstance(container, list) else container[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"path {pointer!r}: {token!r} does not exist") from None


def _index(array: list[Any], token: str, op: str, pointer: str) -> int:
    """The array position a token names: ``-`` or up to the length for add, an element otherwise."""
    if token == "-" and op == "add":
        return len(array)
    end = len(array) if op == "add" else len(array) - 1
    if not token.isdigit() or int(token) > end:
        raise PatchError(f"path {pointer!r}: no index {token!r} in an array of {len(array)}")
    return int(token)


def _apply(document: Any, operation: Mapping[str, Any]) -> Any:
    op, pointer = operation.get("op"), str(operation.get("path", ""))
    if op not in ("add", "remove", "replace"):
        raise PatchError(f"op {op!r}: only add, remove and replace are supported")
    value = copy.deepcopy(operation.get("value"))
    tokens = _tokens(pointer)
    if not tokens:
        if op == "remove":
            raise PatchError("path '': the whole document cannot be removed")
        return value
    parent = document
    for token in tokens[:-1]:
        parent = _child(parent, token, pointer)
    last = tokens[-1]
    if isinstance(parent, list):
        index = _index(parent, last, op, pointer)
        if op == "add":
            parent.insert(index, value)
        elif op == "remove":
            del parent[index]
        else:
            parent[index] = value
    elif isinstance(parent, dict):
        if op != "add" and last not in parent:
            raise PatchError(f"path {pointer!r}: {last!r} does not exist")
        if op == "remove":
            del parent[last]
        else:
            parent[last] = value
    else:
        raise PatchError(f"path {pointer!r}: the parent is neither an object nor an array")
    return document
