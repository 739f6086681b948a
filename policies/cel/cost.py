"""Worst-case cost estimation, following cel-go's estimator (``checker/cost.go``) with the DRA
size bounds (``dynamic-resource-allocation/cel/compile.go``, sizeEstimator) and the Kubernetes
library call costs (``policies.cel.library`` cost rules).

Calibrated on the upstream test expectations (dra-reference 3.4): ``device.driver == "x"`` 4,
``device.attributes["d"].name == "fish"`` 5, ``cel.bind(...)`` 15, ``exists_one`` over the domains
164, ``includes`` 52, the 7-nested ``all()`` 85,555,551. Where the exact cel-go figure is unknown
the estimate errs upwards: it must never be below what an evaluation can really cost, because the
runtime guard skips cost accounting for programs whose estimate is within the limit.

Besides the total, the estimator records for every comprehension the fixed cost of one iteration
(loop condition plus step, without nested comprehensions, library calls and concatenations, which
the runtime guard charges with their actual cost); the guard charges that per iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from policies.cel import decls
from policies.cel import types as t
from policies.cel.checker import Checked
from policies.cel.library import CallSite
from policies.cel.library.cost import scale
from policies.cel.syntax import (
    ACCUMULATOR,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapExpr,
    Select,
    StructExpr,
    children,
)

MAX = (1 << 64) - 1
STRING_TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX_FACTOR = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40  # common.*CreateBaseCost

Range = tuple[int, int]
UNKNOWN: Range = (0, MAX)


def _add(a: Range, b: Range) -> Range:
    return (min(a[0] + b[0], MAX), min(a[1] + b[1], MAX))


def _mul(a: Range, b: Range) -> Range:
    return (min(a[0] * b[0], MAX), min(a[1] * b[1], MAX))


def _factor(a: Range, f: float) -> Range:
    return scale(a, f)


def _union(a: Range, b: Range) -> Range:
    return (min(a[0], b[0]), max(a[1], b[1]))


@dataclass
class Estimate:
    """``cost`` is the (min, max) estimate; ``loop_charge`` what the runtime guard charges for one
    iteration of each comprehension (by node id): its fixed part, without nested comprehensions,
    library calls and concatenations, which are charged as they run."""

    cost: Range
    loop_charge: dict[int, int] = field(default_factory=dict)

    @property
    def max(self) -> int:
        return self.cost[1]


class _Coster:
    """One pass over the tree. With ``charging``, sizes nothing bounds count as 1 and library
    calls as 1: the result is the part of each iteration's cost the runtime guard charges up
    front, the rest (library calls, concatenations) being charged with their actual cost."""

    def __init__(self, checked: Checked, charging: bool = False) -> None:
        self.charging = charging
        self.checked = checked
        self.env = checked.env
        self.paths: dict[int, tuple[str, ...]] = {}
        self.iter_ranges: dict[str, list[tuple[Expr, str]]] = {}
        self.computed: dict[int, Range] = {}
        self.loop_charge: dict[int, int] = {}
        self.nested: dict[int, Range] = {}  # cost of comprehensions inside a sub-tree, per node

    def type(self, e: Expr) -> t.Type:
        return self.checked.types.get(e.id, t.DYN)

    # -- sizes --

    def size(self, e: Expr) -> Range:
        computed = self.computed_size(e)
        if computed is not None:
            return computed
        path = self.paths.get(e.id)
        if path and path[0] != ACCUMULATOR:
            found = self.path_size(path)
            if found is not None:
                return found
        typ = self.type(e)
        if typ.kind in ("int", "uint", "double", "bool", "timestamp", "duration", "null_type"):
            return (1, 1)
        return (1, 1) if self.charging else UNKNOWN

    def computed_size(self, e: Expr) -> Range | None:
        if e.id in self.computed:
            return self.computed[e.id]
        if isinstance(e, Literal):
            if e.kind in ("string", "bytes"):
                n = len(e.value)  # type: ignore[arg-type]
                return (n, n)
            return (1, 1)
        if isinstance(e, ListExpr):
            return (len(e.elements), len(e.elements))
        if isinstance(e, MapExpr):
            return (len(e.entries), len(e.entries))
        return None

    def path_size(self, path: tuple[str, ...]) -> Range | None:
        """The DRA sizeEstimator: bounds of everything reachable from ``device``."""
        if path[0] != "device":
            return None
        attr = decls.attribute_max_size(self.env)
        # (kind, max, element) nodes of the declared device type
        node: object = "device"
        for name in path[1:]:
            node = _step(node, name)
            if node is None:
                return None
        bound = _BOUNDS.get(node if isinstance(node, str) else "")
        if node == "attr":
            bound = attr
        return None if bound is None else (0, bound)

    # -- costs --

    def cost(self, e: Expr) -> Range:
        if isinstance(e, Literal):
            return (0, 0)
        if isinstance(e, Ident):
            return self.cost_ident(e)
        if isinstance(e, Select):
            return self.cost_select(e)
        if isinstance(e, Call):
            return self.cost_call(e)
        if isinstance(e, ListExpr):
            total = (LIST_CREATE, LIST_CREATE)
            for item in e.elements:
                total = _add(total, self.cost(item))
            return total
        if isinstance(e, MapExpr):
            total = (MAP_CREATE, MAP_CREATE)
            for entry in e.entries:
                total = _add(_add(total, self.cost(entry.key)), self.cost(entry.value))
            return total
        if isinstance(e, StructExpr):
            total = (STRUCT_CREATE, STRUCT_CREATE)
            for _, value in e.fields:
                total = _add(total, self.cost(value))
            return total
        assert isinstance(e, Comprehension)
        return self.cost_comprehension(e)

    def cost_ident(self, e: Ident) -> Range:
        scopes = self.iter_ranges.get(e.name)
        if scopes:
            rng, role = scopes[-1]
            base = self.paths.get(rng.id)
            if role == "init":
                if base is not None:
                    self.paths[e.id] = base
            elif base is not None:
                kind = self.type(rng).kind
                if kind == t.LIST:
                    if role == "value1":
                        self.paths[e.id] = (*base, "@items")
                elif kind == t.MAP:
                    self.paths[e.id] = (*base, "@keys" if role in ("value1", "key") else "@values")
        else:
            self.paths[e.id] = (e.name,)
        return (1, 1)

    def cost_select(self, e: Select) -> Range:
        total = self.cost(e.operand)
        if e.test_only:  # has() costs nothing of its own (PresenceTestHasCost(false))
            return total
        if self.type(e.operand).kind in (t.MAP, t.OBJECT, t.PARAM):
            total = _add(total, (1, 1))
        base = self.paths.get(e.operand.id)
        if base is not None:
            self.paths[e.id] = (*base, e.field)
        return total

    def cost_call(self, e: Call) -> Range:
        operands = ([e.target] if e.target is not None else []) + e.args
        costs = [self.cost(x) for x in operands]
        arg_sum: Range = (0, 0)
        for c in costs:
            arg_sum = _add(arg_sum, c)
        if e.function == "_?._":
            base = self.paths.get(e.args[0].id)
            if base is not None:
                self.paths[e.id] = (*base, str(e.args[1].value))  # type: ignore[attr-defined]
            return _add(costs[0], (1, 1))
        overloads = self.checked.overloads.get(e.id, [])
        if not overloads:
            return arg_sum
        total: Range | None = None
        for overload in overloads:
            one = self.function_cost(e, overload, operands, costs, arg_sum)
            total = one if total is None else _union(total, one)
            if overload.id == "index_list":
                self.add_path(e, e.args[0], "@items")
            elif overload.id == "index_map":
                self.add_path(e, e.args[0], "@values")
        assert total is not None
        if e.id not in self.computed:
            result = self.result_size(e, operands)
            if result is not None:
                self.computed[e.id] = result
        return total

    def result_size(self, e: Call, operands: list[Expr]) -> Range | None:
        """The result size the Kubernetes estimator reports with its call estimate
        (apiserver/pkg/cel/library/cost.go ResultSize), which later size-dependent costs use."""
        fn = e.function
        if e.target is None:
            if fn == "lists.range":  # cel-go ext/lists.go estimateListsRange
                count = _literal_count(operands[0])
                return UNKNOWN if count is None else (count, count)
            return None
        # cel-go ext/lists.go (version 3): the allocating list functions report their result size.
        if fn in ("reverse", "flatten"):
            return self.size(operands[0])
        if fn in ("distinct", "sort") and len(operands) == 1:
            return _mul(self.size(operands[0]), self.size(operands[0]))
        if fn == "slice" and len(operands) == 3:
            start = _literal_count(operands[1]) or 0
            end = _literal_count(operands[2])
            end = self.size(operands[0])[1] if end is None else end
            return (max(end - start, 0), max(end - start, 0))
        if fn in ("lowerAscii", "upperAscii", "substring", "trim"):
            return self.size(operands[0])
        if fn in ("find", "findAll") and len(operands) >= 2:
            return (0, self.size(operands[0])[1])
        if fn == "split":
            limit = operands[2] if len(operands) > 2 else None
            if isinstance(limit, Literal) and limit.kind == "int":
                return (0, int(limit.value) % (MAX + 1))  # type: ignore[call-overload]
            return (0, self.size(operands[0])[1])
        if fn == "replace" and len(operands) >= 3:
            return _replace_size(self.size(operands[0]), self.size(operands[1]), self.size(operands[2]))
        return None

    def add_path(self, e: Expr, base: Expr, suffix: str) -> None:
        path = self.paths.get(base.id)
        if path is not None:
            self.paths[e.id] = (*path, suffix)

    def function_cost(
        self, e: Call, overload: decls.OverloadDecl, operands: list[Expr], costs: list[Range], arg_sum: Range
    ) -> Range:
        oid = overload.id
        if overload.cost is not None and self.charging:
            return arg_sum  # the guard charges the call's whole cost (its actual) when it runs
        if oid in ("add_string", "add_bytes") and self.charging:
            return arg_sum  # the runtime guard charges ceil(0.1 x result size) when it runs
        if oid == "add_list" and self.charging:
            return _add((1, 1), arg_sum)  # O(1) in cel-go at run time too
        if overload.cost is not None:
            return _add(overload.cost.estimate(self.call_site(operands)), arg_sum)
        if oid in ("starts_with_string", "ends_with_string", "string_to_bytes", "bytes_to_string"):
            return _add(
                _factor(
                    self.size(
                        operands[-1] if oid.endswith("_string") and len(operands) == 2 else operands[0]
                    ),
                    STRING_TRAVERSAL,
                ),
                arg_sum,
            )
        if oid == "in_list":
            return _add(self.size(operands[1]), arg_sum)
        if oid in ("matches", "matches_string"):
            text = _factor(_add(self.size(operands[0]), (1, 1)), STRING_TRAVERSAL)
            return _add(_mul(text, _factor(self.size(operands[1]), REGEX_FACTOR)), arg_sum)
        if oid == "contains_string":
            text = _factor(self.size(operands[0]), STRING_TRAVERSAL)
            return _add(_mul(text, _factor(self.size(operands[1]), STRING_TRAVERSAL)), arg_sum)
        if oid in ("logical_or", "logical_and"):
            return (costs[0][0], _add(costs[0], costs[1])[1])
        if oid == "conditional":
            self.computed[e.id] = _union(self.size(operands[1]), self.size(operands[2]))
            return _add(costs[0], _union(costs[1], costs[2]))
        if oid in ("add_string", "add_bytes", "add_list"):
            result = _add(self.size(operands[0]), self.size(operands[1]))
            self.computed[e.id] = result
            if oid == "add_list":
                return _add((1, 1), arg_sum)
            return _add(_factor(result, STRING_TRAVERSAL), arg_sum)
        if oid == "equals" and self.type(operands[0]) == self.type(operands[1]) in _CONSTANT_EQUALITY:
            # The Kubernetes estimator prices `==` between two values of the same Kubernetes type
            # itself (apiserver/pkg/cel/library/cost.go): O(1) for quantities, semvers, IPs, CIDRs
            # and URLs. `!=` is left to cel-go's size-based rule.
            return _add((1, 1), arg_sum)
        if oid in ("equals", "not_equals") or (
            oid.split("_")[0] in ("less", "greater") and oid.endswith(("_string", "_bytes"))
        ):
            smallest = min(self.size(operands[0])[1], self.size(operands[1])[1])
            return _add(_factor((1 if smallest > 0 else 0, smallest), STRING_TRAVERSAL), arg_sum)
        if oid in ("size_string", "string_size") and isinstance(operands[0], Literal):
            return _add((1, 1), arg_sum)
        return _add((1, 1), arg_sum)

    def call_site(self, operands: list[Expr]) -> CallSite:
        sizes = tuple(self.size(x) for x in operands)
        elem: Range | None = None
        elem_text = False
        if operands and self.type(operands[0]).kind == t.LIST:
            elem_type = self.type(operands[0]).params[0]
            elem_text = elem_type.kind in ("string", "bytes")
            # The Kubernetes estimator sizes the elements only through the path of the list
            # (listElementNode): the elements of a literal list are not looked at.
            base = self.paths.get(operands[0].id)
            found = self.path_size((*base, "@items")) if base else None
            elem = (
                found
                if found is not None
                else ((1, 1) if elem_type.kind in ("int", "uint", "double", "bool") else UNKNOWN)
            )
        literals = tuple(x.value if isinstance(x, Literal) else None for x in operands)
        return CallSite(sizes, elem, elem_text, literals)

    def cost_comprehension(self, e: Comprehension) -> Range:
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        roles = [(e.iter_var, "value1" if e.iter_var2 is None else "key")]
        if e.iter_var2 is not None:
            roles.append((e.iter_var2, "value2"))
        for name, role in roles:
            self.iter_ranges.setdefault(name, []).append((e.iter_range, role))
        self.iter_ranges.setdefault(e.accu_var, []).append((e.accu_init, "init"))
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        for name, _ in roles:
            self.iter_ranges[name].pop()
        total = _add(total, self.cost(e.result))
        self.iter_ranges[e.accu_var].pop()
        count = self.size(e.iter_range)
        per_iteration = _add(step, loop)
        inner = self.nested_cost(e.loop_condition) + self.nested_cost(e.loop_step)
        self.loop_charge[e.id] = max(per_iteration[1] - inner, 1) if per_iteration[1] < MAX else MAX
        cost = _add(total, _mul(count, per_iteration))
        self.nested[e.id] = cost
        return cost

    def nested_cost(self, e: Expr) -> int:
        """Max cost of the comprehensions directly inside ``e`` (outside any other comprehension)."""
        total = 0
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, Comprehension) and node.id in self.nested:
                total = min(total + self.nested[node.id][1], MAX)
                continue
            stack.extend(children(node))
        return total


# The declared device type as a little tree: node -> {step: node}; leaf bounds below.
_TREE: dict[str, dict[str, str]] = {
    "device": {
        "driver": "driver",
        "attributes": "attrs",
        "capacity": "caps",
        "allowMultipleAllocations": "bool1",
    },
    "attrs": {"@keys": "domain", "@values": "attr_map"},
    "attr_map": {"@keys": "id", "@values": "attr"},
    "caps": {"@keys": "domain", "@values": "cap_map"},
    "cap_map": {"@keys": "id", "@values": "quantity"},
}
# The sizeEstimator answers {0, MaxElements} for every node it can walk to; DeclTypes that set no
# MaxElements (the DRADevice object itself and QuantityDeclType, apiserver/pkg/cel/types.go) answer
# {0, 0}, so e.g. comparing a capacity with ``==`` costs nothing beyond its operands.
_BOUNDS = {
    "device": 0,
    "quantity": 0,
    "driver": decls.MAX_DRIVER_LENGTH,
    "attrs": decls.MAX_ATTRIBUTES,
    "attr_map": decls.MAX_ATTRIBUTES,
    "caps": decls.MAX_ATTRIBUTES,
    "cap_map": decls.MAX_ATTRIBUTES,
    "domain": decls.MAX_DOMAIN_LENGTH,
    "id": decls.MAX_ID_LENGTH,
    "bool1": 1,
}


def _literal_count(e: Expr) -> int | None:
    """A non-negative int literal's value (cel-go nodeAsUintValue), else None."""
    if isinstance(e, Literal) and e.kind == "int" and isinstance(e.value, int) and e.value >= 0:
        return e.value
    return None


def _replace_size(text: Range, old: Range, new: Range) -> Range:
    """The size of ``text.replace(old, new)`` as the Kubernetes estimator bounds it."""
    count_max = retained_max = count_min = retained_min = 0
    if old[0] == 0:  # an empty pattern surrounds every character
        count_max = text[1] + 1 if text[1] < MAX else text[1]
        retained_max = text[1]
    elif new[1] <= old[0]:
        retained_max = text[1]
    else:
        count_max = math.ceil(text[1] / old[0])
    if old[1] == 0:
        count_min = text[0] + 1 if text[0] < MAX else text[0]
        retained_min = text[0]
    elif old[1] <= new[0]:
        retained_min = text[0]
    else:
        count_min = math.ceil(text[0] / old[1])
    return _add(_mul((count_min, count_max), new), (retained_min, retained_max))


_CONSTANT_EQUALITY = frozenset({t.QUANTITY, t.SEMVER, t.IP, t.CIDR, t.URL})


def _step(node: object, name: str) -> object:
    if not isinstance(node, str):
        return None
    # An attribute's DeclType (any/dyn with MaxElements) has no element type, so the sizeEstimator
    # cannot size the elements of a list attribute ("@items" under it is unknown).
    table = _TREE.get(node)
    if table is None:
        return None
    if name in table:
        return table[name]
    # Any other name inside an attribute map is an attribute (compile.go: ElemType == attributeType).
    return "attr" if node == "attr_map" else None


def estimate(checked: Checked) -> Estimate:
    coster = _Coster(checked)
    total = coster.cost(checked.root)
    charging = _Coster(checked, charging=True)
    charging.cost(checked.root)
    return Estimate(total, charging.loop_charge)
