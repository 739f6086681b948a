"""How each library call is charged, as cel-go plus the Kubernetes cost estimator charge it.

Two views of the same rule (``staging/src/k8s.io/apiserver/pkg/cel/library/cost.go``, cel-go
``ext/lists.go`` for the list extension and ``dynamic-resource-allocation/cel/compile.go`` for
``includes``):

* ``estimate(site)`` is the static worst case: it gets the size ranges of the receiver and
  arguments (strings in code points, lists and maps in elements) and returns a ``(min, max)`` cost;
* ``actual(args, result)`` is what the runtime cost tracker adds once the call returned.

Functions the Kubernetes estimator does not know cost cel-go's default of 1 for the call itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_COST = (1 << 64) - 1
STRING_TRAVERSAL_FACTOR = 0.1  # common.StringTraversalCostFactor
REGEX_LENGTH_FACTOR = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE_BASE_COST = 10  # common.ListCreateBaseCost
CALL_COST = 1

SizeRange = tuple[int, int]
CostRange = tuple[int, int]
UNKNOWN_SIZE: SizeRange = (0, MAX_COST)


@dataclass(frozen=True)
class CallSite:
    """What the estimator knows about one call.

    ``sizes`` holds one range per operand, receiver first for member calls; ``elem_size`` is the
    size of the receiver list's elements and ``elem_is_text`` whether they are strings or bytes;
    ``literals`` holds the value of each operand that is a literal (None otherwise).
    """

    sizes: tuple[SizeRange, ...]
    elem_size: SizeRange | None = None
    elem_is_text: bool = False
    literals: tuple[Any, ...] = field(default=())

    def size(self, index: int) -> SizeRange:
        return self.sizes[index] if index < len(self.sizes) else UNKNOWN_SIZE

    def literal(self, index: int) -> Any:
        return self.literals[index] if index < len(self.literals) else None


@dataclass(frozen=True)
class CostRule:
    """One overload's cost: ``description`` says it in words (for docs and error messages)."""

    description: str
    estimate: Callable[[CallSite], CostRange]
    actual: Callable[[Sequence[Any], Any], int]

    def worst_case(self, max_sizes: Sequence[int], elem_max: int | None = None, *, text: bool = False) -> int:
        """The estimate's upper bound when only the operands' maximum sizes are known."""
        site = CallSite(
            sizes=tuple((0, size) for size in max_sizes),
            elem_size=None if elem_max is None else (0, elem_max),
            elem_is_text=text,
        )
        return self.estimate(site)[1]


def _sat(value: int) -> int:
    return min(value, MAX_COST)


_TWO_TO_64 = float(1 << 64)


def multiply_by_cost_factor(value: int, factor: float) -> int:
    """cel-go ``multiplyByCostFactor`` (checker/cost.go): float64 arithmetic rounded up, saturating
    only when the product leaves uint64. An unknown size (2^64-1) times 0.1 is therefore about
    1.8e18, not 2^64-1."""
    as_float = float(value)
    if as_float > 0 and factor > 0 and as_float > float(MAX_COST) / factor:
        return MAX_COST
    ceil = math.ceil(as_float * factor)
    if ceil >= _TWO_TO_64:
        return MAX_COST
    return int(ceil)


def scale(size: SizeRange, factor: float) -> CostRange:
    """checker.SizeEstimate.MultiplyByCostFactor: round each bound up."""
    return (multiply_by_cost_factor(size[0], factor), multiply_by_cost_factor(size[1], factor))


def times(a: SizeRange, b: SizeRange) -> CostRange:
    return (_sat(a[0] * b[0]), _sat(a[1] * b[1]))


def plus(a: CostRange, b: CostRange) -> CostRange:
    return (_sat(a[0] + b[0]), _sat(a[1] + b[1]))


def actual_size(value: Any) -> int:
    """cel-go ``actualSize``: the length of anything sized, 1 for everything else."""
    if isinstance(value, str | bytes | list | tuple | Mapping):
        return len(value)
    return 1


def fixed(cost: int, actual: int | None = None) -> CostRule:
    """A constant cost (``actual`` differs only for ``includes``, whose runtime cost is cel-go's 1)."""
    runtime = cost if actual is None else actual
    return CostRule(f"fixed {cost}", lambda site: (cost, cost), lambda args, result: runtime)


DEFAULT = fixed(CALL_COST)


def traversal(index: int, factor: float = 1.0) -> CostRule:
    """Proportional to operand ``index``'s length: ceil(len * 0.1 * factor)."""
    per_unit = STRING_TRAVERSAL_FACTOR * factor

    def actual(args: Sequence[Any], result: Any) -> int:
        return math.ceil(actual_size(args[index]) * per_unit)

    return CostRule(
        f"{factor:g} x traversal of operand {index}",
        lambda site: scale(site.size(index), per_unit),
        actual,
    )


def parse_traversal(index: int, factor: float = 1.0) -> CostRule:
    """A global parsing function (``quantity``, ``semver``, ``cidr``, ``ip``...): the Kubernetes
    estimator only prices these when called on a target, which a global call never has, so the
    estimate is cel-go's default 1 while the runtime tracker still charges the traversal."""
    runtime = traversal(index, factor)
    return CostRule(f"1 (estimate); {runtime.description} (runtime)", lambda site: (1, 1), runtime.actual)


def _traversal_cost(value: Any) -> int:
    """k8s ``traversalCost``: strings by length (truncated), containers by their contents."""
    if isinstance(value, str):  # Go's len(): UTF-8 bytes, unlike Size() which counts runes
        return int(len(value.encode("utf-8")) * STRING_TRAVERSAL_FACTOR)
    if isinstance(value, bytes):
        return int(len(value) * STRING_TRAVERSAL_FACTOR)
    if isinstance(value, list | tuple):
        return sum(_traversal_cost(item) for item in value)
    if isinstance(value, Mapping):
        return sum(_traversal_cost(k) + _traversal_cost(v) for k, v in value.items())
    return 1


def _estimate_list_scan(site: CallSite) -> CostRange:
    """1 per element, plus a traversal of each element when they are strings or bytes.

    The Kubernetes estimator picks the branch from the receiver's static type, not from the
    overload: a receiver without type parameters (a string, or an ``any``/``dyn`` attribute that
    may be one) is priced as a string traversal even for the list overload of indexOf."""
    if site.elem_size is None:
        return scale(site.size(0), STRING_TRAVERSAL_FACTOR)
    per_element: CostRange = (1, 1)
    if site.elem_is_text:
        per_element = plus(per_element, scale(site.elem_size or UNKNOWN_SIZE, STRING_TRAVERSAL_FACTOR))
    return times(site.size(0), per_element)


LIST_SCAN = CostRule(
    "one traversal of the receiver list", _estimate_list_scan, lambda args, result: _traversal_cost(args[0])
)
STRING_SCAN = CostRule(
    "one traversal of the receiver string",
    lambda site: scale(site.size(0), STRING_TRAVERSAL_FACTOR),
    lambda args, result: _traversal_cost(args[0]),
)


def _estimate_regex(site: CallSite) -> CostRange:
    text = scale(plus(site.size(0), (1, 1)), STRING_TRAVERSAL_FACTOR)
    return times(text, scale(site.size(1), REGEX_LENGTH_FACTOR))


def _actual_regex(args: Sequence[Any], result: Any) -> int:
    text = math.ceil((1 + actual_size(args[0])) * STRING_TRAVERSAL_FACTOR)
    return text * math.ceil(actual_size(args[1]) * REGEX_LENGTH_FACTOR)


REGEX = CostRule("(text + 1) x regex length", _estimate_regex, _actual_regex)


def _estimate_join(site: CallSite) -> CostRange:
    count = site.size(0)
    total = times(count, site.elem_size or UNKNOWN_SIZE)
    if len(site.sizes) > 1:
        separators = (max(count[0] - 1, 0), max(count[1] - 1, 0))
        total = plus(total, times(site.size(1), separators))
    return scale(total, STRING_TRAVERSAL_FACTOR)


JOIN = CostRule(
    "traversal of the joined result",
    _estimate_join,
    lambda args, result: math.ceil(actual_size(result) * 2 * STRING_TRAVERSAL_FACTOR),
)


def allocating_list(
    factor: float,
    size_of: Callable[[CallSite], SizeRange],
    actual_size_of: Callable[[Sequence[Any], Any], int],
) -> CostRule:
    """cel-go list-extension cost: size x factor + the call + a list allocation."""

    def estimate(site: CallSite) -> CostRange:
        scaled = scale(size_of(site), factor)
        return plus(scaled, (CALL_COST + LIST_CREATE_BASE_COST, CALL_COST + LIST_CREATE_BASE_COST))

    def actual(args: Sequence[Any], result: Any) -> int:
        return int(actual_size_of(args, result) * factor) + CALL_COST + LIST_CREATE_BASE_COST

    return CostRule(f"{factor:g} x list size + list allocation", estimate, actual)
