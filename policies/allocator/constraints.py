"""Claim constraints: ``matchAttribute`` and ``distinctAttribute``.

Upstream 1.36: ``matchAttributeConstraint`` in ``structured/internal/incubating/allocator_incubating.go``,
``distinctAttributeConstraint`` in ``structured/internal/incubating/constraint.go``, and the set
semantics of ``structured/internal/experimental`` when list-type attributes are on
(dra-reference 4.9). Kept as upstream has them:

* removing a device only decrements a counter: the match reference value is re-seeded only when the
  count drops to zero, and the list-mode intersection is never widened again on backtrack;
* the distinct tracker remembers one value per *request name*, so the second device of a request
  replaces the first one's value, and removing it forgets both.

Trackers only see devices of requests they apply to; the search filters that once per request.
"""

from __future__ import annotations

from typing import Protocol

from policies.api.resource import DeviceAttribute

Scalar = tuple[str, object]


class AttributeValue:
    """One device attribute, pre-digested for the constraint comparisons."""

    __slots__ = ("as_set", "fields", "scalar")

    def __init__(self, attribute: DeviceAttribute) -> None:
        fields: dict[str, object] = {}
        # Go checks the members in this order: string, int, bool, version.
        for tag, value in (
            ("string", attribute.string),
            ("int", attribute.int_),
            ("bool", attribute.bool_),
            ("version", attribute.version),
        ):
            if value is not None:
                fields[tag] = value
        self.fields = fields
        self.scalar: Scalar | None = next(iter(fields.items()), None)
        self.as_set = _as_set(attribute, self.scalar)


def _as_set(attribute: DeviceAttribute, scalar: Scalar | None) -> frozenset[Scalar] | None:
    """A scalar or a list attribute as a set of typed values; ``None`` for empty or unknown."""
    if scalar is not None:
        return frozenset([scalar])
    for tag, values in (
        ("string", attribute.strings),
        ("int", attribute.ints),
        ("bool", attribute.bools),
        ("version", attribute.versions),
    ):
        if values:
            return frozenset((tag, v) for v in values)
    return None


class HasAttributes(Protocol):
    def attribute(self, name: str) -> AttributeValue | None: ...


class Tracker(Protocol):
    """State of one claim constraint during the search."""

    index: int
    kind: str
    attribute: str

    def add(self, device: HasAttributes, request: str) -> bool: ...

    def remove(self, request: str) -> None: ...


class MatchAttribute:
    """All devices must carry the attribute with the same value (or, in list mode, a common one)."""

    kind = "matchAttribute"

    def __init__(self, index: int, attribute: str, list_mode: bool) -> None:
        self.index = index
        self.attribute = attribute
        self._list_mode = list_mode
        self._count = 0
        self._reference: dict[str, object] = {}
        self._common: frozenset[Scalar] = frozenset()

    def add(self, device: HasAttributes, request: str) -> bool:
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self._list_mode:
            return self._add_set(value)
        if self._count == 0:
            self._reference = value.fields
            self._count = 1
            return True
        if value.scalar is None:
            return False
        tag, item = value.scalar
        if tag not in self._reference or self._reference[tag] != item:
            return False
        self._count += 1
        return True

    def _add_set(self, value: AttributeValue) -> bool:
        if value.as_set is None:
            return False
        if self._count == 0:
            self._common = value.as_set
            self._count = 1
            return True
        common = self._common & value.as_set
        if not common:
            return False
        self._common = common
        self._count += 1
        return True

    def remove(self, request: str) -> None:
        self._count -= 1


class DistinctAttribute:
    """All devices must carry the attribute with pairwise different (list mode: disjoint) values."""

    kind = "distinctAttribute"

    def __init__(self, index: int, attribute: str, list_mode: bool) -> None:
        self.index = index
        self.attribute = attribute
        self._list_mode = list_mode
        self._count = 0
        self._by_request: dict[str, AttributeValue] = {}

    def add(self, device: HasAttributes, request: str) -> bool:
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self._count > 0 and not self._differs(value):
            return False
        self._by_request[request] = value
        self._count += 1
        return True

    def _differs(self, value: AttributeValue) -> bool:
        if self._list_mode:
            if value.as_set is None:
                return False
            return all(
                kept.as_set is None or not (kept.as_set & value.as_set) for kept in self._by_request.values()
            )
        if not self._by_request:
            return True
        if value.scalar is None:
            return False
        tag, item = value.scalar
        return all(kept.fields.get(tag, _MISSING) != item for kept in self._by_request.values())

    def remove(self, request: str) -> None:
        self._by_request.pop(request, None)
        self._count -= 1


_MISSING = object()
