"""cel-go's Sets extension (``ext/sets.go``): containment, equivalence and intersection of lists.

Membership uses CEL equality, so ``sets.contains([1, 2.0, 3u], [1.0, 2u, 3])`` is true; a comparison
that errors counts as "not a member".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.cel.library.equality import cel_contains
from policies.cel.library.overload import Overload


def sets_contains(items: Sequence[Any], sub: Sequence[Any]) -> bool:
    return all(cel_contains(items, x) for x in sub)


def sets_equivalent(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return any(cel_contains(b, x) for x in a)


_LT = "list(T)"
OVERLOADS: tuple[Overload, ...] = (
    Overload("sets.contains", "sets_contains_list_list", False, (_LT, _LT), "bool", sets_contains),
    Overload("sets.equivalent", "sets_equivalent_list_list", False, (_LT, _LT), "bool", sets_equivalent),
    Overload("sets.intersects", "sets_intersects_list_list", False, (_LT, _LT), "bool", sets_intersects),
)
