"""The list and map walkers every resource validation goes through.

Upstream (``pkg/apis/resource/validation/validation.go``) validates every list with one of three
helpers, and their order of checks is visible in the output, so they are reproduced here:

* a list longer than its limit yields a single "Too many" error and nothing else (the items of an
  oversized list are not looked at: that protects the API server from huge inputs);
* items are validated in order, then duplicates are reported at the second occurrence;
* map keys are validated against the map's own path, item errors against ``path[key]``, with very
  long keys shortened in the middle so that one bad key does not produce a kilobyte of path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from policies.validation.fielderrors import ErrorList, Path, duplicate, too_many

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

ItemValidator = Callable[[T, Path], ErrorList]


def validate_slice(
    items: Sequence[T] | None, max_size: int, validate_item: ItemValidator[T], path: Path
) -> ErrorList:
    """Validate each item; a negative ``max_size`` means no limit."""
    items = items or []
    if 0 <= max_size < len(items):
        return [too_many(path, len(items), max_size)]
    errs: ErrorList = []
    for i, item in enumerate(items):
        errs += validate_item(item, path.index(i))
    return errs


def validate_set(
    items: Sequence[T] | None,
    max_size: int,
    validate_item: ItemValidator[T],
    key: Callable[[T], K],
    path: Path,
) -> ErrorList:
    """Like :func:`validate_slice`, then report every repeated key as "Duplicate value"."""
    items = items or []
    errs = validate_slice(items, max_size, validate_item, path)
    if 0 <= max_size < len(items):
        return errs
    seen: set[K] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            errs.append(duplicate(path.index(i), k))
        seen.add(k)
    return errs


def truncate_key(key: str, max_len: int) -> str:
    """Shorten a long map key in the middle (upstream ``truncateIfTooLong``)."""
    max_len = max(max_len, 16)
    if len(key) <= max_len:
        return key
    remaining = max_len - 3
    return key[: (remaining + 1) // 2] + "..." + key[len(key) - remaining // 2 :]


def validate_map(
    items: Mapping[str, T] | None,
    max_size: int,
    truncate_len: int,
    validate_key: Callable[[str, Path], ErrorList],
    validate_item: ItemValidator[T],
    path: Path,
) -> ErrorList:
    """Keys are checked against ``path``, values against ``path[key]``; negative ``max_size``: no limit."""
    items = items or {}
    if 0 <= max_size < len(items):
        return [too_many(path, len(items), max_size)]
    errs: ErrorList = []
    for k, item in items.items():
        errs += validate_key(k, path)
        errs += validate_item(item, path.key(truncate_key(k, truncate_len)))
    return errs


def no_item_checks(_item: object, _path: Path) -> ErrorList:
    """For lists and maps whose entries need no checks of their own (any parsed quantity is valid)."""
    return []
