"""The CEL abstract syntax tree, in the shape cel-go's checker and cost estimator work on.

Macros are expanded by the parser into comprehensions exactly as cel-go expands them (same
accumulator, loop condition and step), because the type checker and the cost estimator are
defined on that form. Each comprehension also remembers which macro produced it and the user's
own sub-expressions (``macro``, ``body``, ``guard``), so the engines can run the macro natively.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Operator function names, as cel-go spells them (common/operators).
CONDITIONAL = "_?_:_"
LOGICAL_AND = "_&&_"
LOGICAL_OR = "_||_"
LOGICAL_NOT = "!_"
NEGATE = "-_"
INDEX = "_[_]"
OPT_INDEX = "_[?_]"
OPT_SELECT = "_?._"
EQUALS = "_==_"
NOT_EQUALS = "_!=_"
IN = "@in"
NOT_STRICTLY_FALSE = "@not_strictly_false"
ADD = "_+_"

BINARY_OPERATORS = {
    "==": EQUALS,
    "!=": NOT_EQUALS,
    "<": "_<_",
    "<=": "_<=_",
    ">": "_>_",
    ">=": "_>=_",
    "in": IN,
    "+": ADD,
    "-": "_-_",
    "*": "_*_",
    "/": "_/_",
    "%": "_%_",
}

# The accumulator variable of macro comprehensions (cel-go's parser.AccumulatorName).
ACCUMULATOR = "@result"


@dataclass(eq=False)
class Expr:
    """A node: ``id`` is unique within one parse, ``offset`` is the code-point offset of the token
    cel-go reports errors at (the operator for calls, the '.' for selections)."""

    id: int
    offset: int


@dataclass(eq=False)
class Literal(Expr):
    value: object
    kind: str  # int, uint, double, string, bytes, bool, null


@dataclass(eq=False)
class Ident(Expr):
    name: str


@dataclass(eq=False)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False  # has(operand.field)


@dataclass(eq=False)
class Call(Expr):
    function: str
    args: list[Expr]
    target: Expr | None = None


@dataclass(eq=False)
class ListExpr(Expr):
    elements: list[Expr]
    optional_indices: frozenset[int] = frozenset()


@dataclass(eq=False)
class MapEntry:
    key: Expr
    value: Expr
    optional: bool
    offset: int


@dataclass(eq=False)
class MapExpr(Expr):
    entries: list[MapEntry]


@dataclass(eq=False)
class StructExpr(Expr):
    type_name: str
    fields: list[tuple[str, Expr]]


@dataclass(eq=False)
class Comprehension(Expr):
    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr
    iter_var2: str | None = None
    # What produced it: all, exists, exists_one, map, filter, bind, transformList, transformMap,
    # transformMapEntry, sortBy (its map), optMap/optFlatMap (their bind).
    macro: str = ""
    # The user's expression: predicate (all/exists/exists_one/filter), transform (map,
    # transform*), body (bind).
    body: Expr | None = None
    # The filter predicate of map(x, p, f) and transform*(k, v, p, f).
    guard: Expr | None = None
    extra: dict[str, object] = field(default_factory=dict)


def children(e: Expr) -> list[Expr]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(e, Select):
        return [e.operand]
    if isinstance(e, Call):
        return ([e.target] if e.target is not None else []) + list(e.args)
    if isinstance(e, ListExpr):
        return list(e.elements)
    if isinstance(e, MapExpr):
        out: list[Expr] = []
        for entry in e.entries:
            out += [entry.key, entry.value]
        return out
    if isinstance(e, StructExpr):
        return [v for _, v in e.fields]
    if isinstance(e, Comprehension):
        return [e.iter_range, e.accu_init, e.loop_condition, e.loop_step, e.result]
    return []


def walk(e: Expr) -> list[Expr]:
    """Every node of the tree, parents before children (iterative: trees can be deep)."""
    out: list[Expr] = []
    stack = [e]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        out.append(node)
        stack.extend(reversed(children(node)))
    return out
