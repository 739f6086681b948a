"""Lowering a checked expression into programs an engine can run with cel-go's results.

The engines lack much of what DRA selectors use (optional syntax, ``cel.bind``, two-variable
comprehensions, the Kubernetes libraries) and differ from cel-go in places (string sizes in bytes,
no error absorption inside their comprehensions, heterogeneous equality on Kubernetes objects).
The lowering therefore emits plain CEL that both engines parse, in which:

* every static path into ``device`` becomes a flat input variable (``device.attributes["d"].m``
  is one variable, unbound when the device lacks the attribute so that reading it fails exactly
  where cel-go's "no such key: m" would; ``has()`` and ``"m" in ...`` become presence variables;
  an unknown domain is an empty map);
* operations whose native behaviour can differ call registered Python helpers (equality that may
  meet Kubernetes objects, ordering involving doubles or dynamic values, string ``size()``,
  ``matches``, several conversions, every library function);
* ``cel.bind`` is substituted when its value is a device path or a local, otherwise evaluated by
  a helper that runs the body as a separate program; optional selection/indexing and optional
  list/map entries become helper calls or ternaries;
* a comprehension runs natively only when its body cannot fail and the program's estimated cost is
  within the limit; otherwise a helper runs it from Python, one engine program per iteration,
  applying cel-go's error-absorption rules and charging each iteration's worst cost (the runtime
  cost guard);
* sub-expressions nested deeper than the Rust parser accepts become separate programs too.

The plan is engine-neutral: helpers take and return plain Python values; each engine adapts
values at its boundary (see ``policies.cel.engines``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policies.cel import runtime
from policies.cel import types as t
from policies.cel.checker import Checked
from policies.cel.cost import Estimate
from policies.cel.decls import OverloadDecl
from policies.cel.syntax import (
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
    walk,
)

_PREC_TERNARY, _PREC_OR, _PREC_AND, _PREC_REL, _PREC_ADD, _PREC_MUL, _PREC_UNARY, _PREC_MEMBER = range(1, 9)
_BINARY = {
    "_||_": ("||", _PREC_OR),
    "_&&_": ("&&", _PREC_AND),
    "_==_": ("==", _PREC_REL),
    "_!=_": ("!=", _PREC_REL),
    "_<_": ("<", _PREC_REL),
    "_<=_": ("<=", _PREC_REL),
    "_>_": (">", _PREC_REL),
    "_>=_": (">=", _PREC_REL),
    "@in": ("in", _PREC_REL),
    "_+_": ("+", _PREC_ADD),
    "_-_": ("-", _PREC_ADD),
    "_*_": ("*", _PREC_MUL),
    "_/_": ("/", _PREC_MUL),
    "_%_": ("%", _PREC_MUL),
}
_ORDERING = {
    "_<_": ("_lt", runtime.lt),
    "_<=_": ("_le", runtime.le),
    "_>_": ("_gt", runtime.gt),
    "_>=_": ("_ge", runtime.ge),
}
_NATIVE_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_SAFE_ORDER_KINDS = frozenset({"int", "uint", "string", "bool", "bytes", "timestamp", "duration"})


@dataclass(frozen=True)
class Capabilities:
    """What one engine runs natively with cel-go's semantics."""

    name: str
    optional_values: bool  # optional.of/none(), hasValue/value/orValue/or on optionals
    cross_numeric: bool  # 1 == 1.0, 1 < 2u
    presence_errors: bool  # has(a.b.c) fails when a.b does, instead of being false
    max_nesting: int  # deepest bracket nesting one program may have (deeper parts run separately)
    typed_values: bool  # uints and type values come back as such, not as ints and type names
    conversions: frozenset[str]  # conversion overload ids it implements like cel-go


@dataclass(frozen=True)
class Input:
    """A flat input variable read from the device binding.

    ``kind``: device, driver, multi, section (device.attributes / device.capacity), domain
    (one domain's map, empty when absent), value (one entry, unbound when absent), has (presence),
    const (a value computed at lowering time, the same for every device).
    """

    name: str
    kind: str
    section: str = ""
    domain: str = ""
    ident: str = ""


@dataclass(frozen=True)
class Helper:
    """A Python function registered with the engine; ``overload`` is set for library functions
    (its cost rule feeds the runtime guard)."""

    name: str
    fn: Callable[..., Any]
    overload: OverloadDecl | None = None  # set when the call must be charged at run time


@dataclass
class Unit:
    """One engine program: its source, the device inputs it reads and the locals passed in."""

    source: str
    inputs: tuple[Input, ...]
    params: tuple[str, ...]
    uses: frozenset[str] = frozenset()  # the params the source really reads


@dataclass
class Loop:
    """A comprehension, bind or split-out sub-expression run from Python.

    ``kind`` is the macro (all, exists, exists_one, map, filter, transformList, transformMap,
    transformMapEntry), ``bind`` or ``sub``. ``captured`` are the enclosing locals passed as the
    helper's trailing arguments; ``iter_vars`` the engine names of the iteration variables.
    """

    name: str
    kind: str
    captured: tuple[str, ...]
    iter_vars: tuple[str, ...] = ()
    body: Unit | None = None
    guard: Unit | None = None
    init: Unit | None = None
    bind_var: str = ""
    charge: int = 0


@dataclass
class Plan:
    main: Unit
    helpers: dict[str, Helper] = field(default_factory=dict)
    loops: dict[str, Loop] = field(default_factory=dict)
    inputs: dict[str, Input] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)  # values of the "const" inputs
    guarded: bool = False
    limit: int = 0  # the runtime cost limit


@dataclass(frozen=True)
class _Frag:
    text: str
    prec: int
    depth: int
    python: bool = False  # the value comes from Python (a helper's result or a passed-in local)


@dataclass(frozen=True)
class _Var:
    name: str


@dataclass(frozen=True)
class _Inline:
    expr: Expr
    scope: dict[str, _Var | _Inline]


Scope = dict[str, "_Var | _Inline"]


@dataclass(frozen=True)
class _DevRef:
    kind: str  # device driver multi section domain value
    section: str = ""
    domain: str = ""
    ident: str = ""


def _string_literal(value: str) -> str:
    out = []
    for ch in value:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code > 0x7E:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _bytes_literal(value: bytes) -> str:
    return 'b"' + "".join(f"\\x{b:02x}" for b in value) + '"'


class _Lowering:
    def __init__(
        self, checked: Checked, estimate: Estimate, caps: Capabilities, guarded: bool, limit: int
    ) -> None:
        self.checked = checked
        self.estimate = estimate
        self.caps = caps
        self.guarded = guarded
        self.plan = Plan(Unit("", (), ()), guarded=guarded, limit=limit)
        self.counter = 0
        # Per program being emitted: the inputs and local variables it references.
        self.unit_inputs: list[dict[str, Input]] = []
        self.unit_locals: list[set[str]] = []

    # -- naming and bookkeeping --

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"_{prefix}{self.counter}"

    def type(self, e: Expr) -> t.Type:
        return self.checked.types.get(e.id, t.DYN)

    def helper(self, name: str, fn: Callable[..., Any], overload: OverloadDecl | None = None) -> str:
        self.plan.helpers.setdefault(name, Helper(name, fn, overload))
        return name

    def input(self, kind: str, section: str = "", domain: str = "", ident: str = "") -> str:
        key = (kind, section, domain, ident)
        for existing in self.plan.inputs.values():
            if (existing.kind, existing.section, existing.domain, existing.ident) == key:
                self.unit_inputs[-1][existing.name] = existing
                return existing.name
        name = self.fresh("i")
        found = Input(name, kind, section, domain, ident)
        self.plan.inputs[name] = found
        self.unit_inputs[-1][name] = found
        return name

    def use_local(self, name: str) -> str:
        self.unit_locals[-1].add(name)
        return name

    def unit(self, build: Callable[[], _Frag], params: tuple[str, ...] = ()) -> tuple[Unit, tuple[str, ...]]:
        """Emit a separate program; returns it and the enclosing locals it captured."""
        self.unit_inputs.append({})
        self.unit_locals.append(set())
        frag = build()
        inputs = self.unit_inputs.pop()
        used = self.unit_locals.pop()
        captured = tuple(sorted(used - set(params)))
        for name in captured:  # the caller must pass them, so they are used there too
            if self.unit_locals:
                self.unit_locals[-1].add(name)
        return Unit(frag.text, tuple(inputs.values()), params + captured, frozenset(used)), captured

    # -- entry --

    def run(self) -> Plan:
        self.heights = _heights(self.checked.root)
        main, _ = self.unit(lambda: self.emit(self.checked.root, {}))
        self.plan.main = main
        return self.plan

    # -- device paths --

    def resolve(self, e: Expr, scope: Scope) -> _DevRef | None:
        if isinstance(e, Ident):
            if e.name == ".device":
                return _DevRef("device")
            bound = scope.get(e.name)
            if isinstance(bound, _Inline):
                return self.resolve(bound.expr, bound.scope)
            if bound is None and e.name == "device" and e.id not in self.checked.locals:
                return _DevRef("device")
            return None
        key: str | None = None
        base_expr: Expr | None = None
        if isinstance(e, Select) and not e.test_only:
            key, base_expr = e.field, e.operand
        elif (
            isinstance(e, Call)
            and e.function == "_[_]"
            and isinstance(e.args[1], Literal)
            and e.args[1].kind == "string"
        ):
            key, base_expr = str(e.args[1].value), e.args[0]
        if key is None or base_expr is None:
            return None
        base = self.resolve(base_expr, scope)
        return None if base is None else _step(base, key)

    def emit_ref(self, ref: _DevRef) -> _Frag:
        if ref.kind == "device":
            return _Frag(self.input("device"), _PREC_MEMBER, 0)
        if ref.kind in ("driver", "multi", "section"):
            return _Frag(self.input(ref.kind, ref.section), _PREC_MEMBER, 0)
        return _Frag(self.input(ref.kind, ref.section, ref.domain, ref.ident), _PREC_MEMBER, 0)

    # -- emission helpers --

    def wrap(self, frag: _Frag, prec: int) -> _Frag:
        if frag.prec >= prec:
            return frag
        return _Frag(f"({frag.text})", _PREC_MEMBER, frag.depth + 1)

    def call(self, name: str, args: list[_Frag]) -> _Frag:
        depth = max((a.depth for a in args), default=0) + 1
        text = f"{name}({', '.join(a.text for a in args)})"
        return _Frag(text, _PREC_MEMBER, depth, python=name in self.plan.helpers)

    def member(self, target: _Frag, name: str, args: list[_Frag]) -> _Frag:
        target = self.wrap(target, _PREC_MEMBER)
        depth = max([target.depth] + [a.depth for a in args]) + 1
        return _Frag(f"{target.text}.{name}({', '.join(a.text for a in args)})", _PREC_MEMBER, depth)

    def binary(self, op: str, prec: int, lhs: _Frag, rhs: _Frag) -> _Frag:
        left = self.wrap(lhs, prec)
        right = self.wrap(rhs, prec + 1)
        return _Frag(f"{left.text} {op} {right.text}", prec, max(left.depth, right.depth))

    def lib_call(self, name: str, fn: Callable[..., Any], args: list[_Frag]) -> _Frag:
        return self.call(self.helper(name, fn), args)

    # -- the walk --

    def emit(self, e: Expr, scope: Scope) -> _Frag:
        """Emit a node; in an expression nested deeper than the engine's parser accepts, every
        node at a multiple of half that depth (counted from the leaves) becomes its own program."""
        cut = self.caps.max_nesting // 2
        height = self.heights.get(e.id, 0)
        if self.heights[self.checked.root.id] > cut and height and height % cut == 0:
            frag = self.split(e, scope)
        else:
            frag = self.emit_node(e, scope)
        if frag.python and self.caps.name == "rust":
            frag = self.native_uint(frag, self.type(e))
        return frag

    def native_uint(self, frag: _Frag, typ: t.Type) -> _Frag:
        """The Rust engine hands Python every uint as a plain int and takes Python ints back as
        ints; where the static type says uint (or list of uint), convert back inside the engine."""
        if typ.kind == "uint":
            return _Frag(f"uint({frag.text})", _PREC_MEMBER, frag.depth + 1)
        if typ.kind == t.LIST and typ.params and typ.params[0].kind == "uint":
            var = self.fresh("l")
            base = self.wrap(frag, _PREC_MEMBER)
            return _Frag(f"{base.text}.map({var}, uint({var}))", _PREC_MEMBER, frag.depth + 2)
        return frag

    def split(self, e: Expr, scope: Scope) -> _Frag:
        """Run a sub-expression as its own program (captured locals passed as arguments)."""
        name = self.fresh("sub")
        unit, captured = self.unit(lambda: self.emit_node(e, scope))
        self.plan.loops[name] = Loop(name, "sub", captured, body=unit)
        return self.call(self.helper(name, _unbound), [_Frag(c, _PREC_MEMBER, 0) for c in captured])

    def emit_node(self, e: Expr, scope: Scope) -> _Frag:
        if isinstance(e, Literal):
            return self.literal(e)
        ref = self.resolve(e, scope)
        if ref is not None:
            return self.emit_ref(ref)
        if isinstance(e, Ident):
            bound = scope.get(e.name)
            if isinstance(bound, _Inline):
                return self.emit(bound.expr, bound.scope)
            if isinstance(bound, _Var):
                return _Frag(self.use_local(bound.name), _PREC_MEMBER, 0, python=True)
            return _Frag(e.name.removeprefix("."), _PREC_MEMBER, 0)  # a type identifier (int, string...)
        if isinstance(e, Select):
            return self.select(e, scope)
        if isinstance(e, Call):
            return self.emit_call(e, scope)
        if isinstance(e, ListExpr):
            return self.list_literal(e, scope)
        if isinstance(e, MapExpr):
            return self.map_literal(e, scope)
        if isinstance(e, Comprehension):
            return self.comprehension(e, scope)
        assert isinstance(e, StructExpr)
        raise AssertionError("message construction is rejected by the checker")

    def literal(self, e: Literal) -> _Frag:
        v = e.value
        if e.kind == "string":
            return _Frag(_string_literal(str(v)), _PREC_MEMBER, 0)
        if e.kind == "bytes":
            return _Frag(_bytes_literal(v), _PREC_MEMBER, 0)  # type: ignore[arg-type]
        if e.kind == "bool":
            return _Frag("true" if v else "false", _PREC_MEMBER, 0)
        if e.kind == "null":
            return _Frag("null", _PREC_MEMBER, 0)
        # Numbers rank below member access so that a selection or call on one gets parentheses:
        # ``dyn(1).x`` must not become ``1.x``, which celpy reads as the double ``1.`` then ``x``.
        if e.kind == "uint":
            return _Frag(f"{v}u", _PREC_UNARY, 0)
        if e.kind == "int":
            return _Frag(str(v), _PREC_UNARY, 0)
        f = float(v)  # type: ignore[arg-type]
        if math.isfinite(f):
            return _Frag(repr(f), _PREC_UNARY, 0)
        return _Frag(f'double("{f!r}")', _PREC_MEMBER, 1)

    def select(self, e: Select, scope: Scope) -> _Frag:
        if e.test_only:
            base = self.resolve(e.operand, scope)
            if base is not None and base.kind in ("device", "section"):
                return _Frag("true", _PREC_MEMBER, 0)  # fields always set; unknown domains "exist"
            if base is not None and base.kind == "domain":
                return _Frag(self.input("has", base.section, base.domain, e.field), _PREC_MEMBER, 0)
            operand = self.emit(e.operand, scope)
            operand_type = self.type(e.operand)
            if t.is_optional(operand_type) or t.is_dyn(operand_type) or not self.caps.presence_errors:
                # A dynamic operand may be a scalar, whose presence test is false in cel-go.
                name = _Frag(_string_literal(e.field), _PREC_MEMBER, 0)
                return self.lib_call("_has", runtime.has_field, [operand, name])
            operand = self.wrap(operand, _PREC_MEMBER)
            return _Frag(f"has({operand.text}.{e.field})", _PREC_MEMBER, operand.depth + 1)
        operand_type = self.type(e.operand)
        operand = self.emit(e.operand, scope)
        if t.is_optional(operand_type):
            return self.lib_call(
                "_opt_chain", runtime.opt_chain, [operand, _Frag(_string_literal(e.field), 8, 0)]
            )
        if t.is_dyn(operand_type):
            # A dynamic operand may hold a string, a number or a Kubernetes object: cel-go reports
            # "no such key: <field>" for those (attributes.go refQualify), the engines do not.
            return self.lib_call("_index", runtime.index, [operand, _Frag(_string_literal(e.field), 8, 0)])
        operand = self.wrap(operand, _PREC_MEMBER)
        return _Frag(f"{operand.text}.{e.field}", _PREC_MEMBER, operand.depth)

    # -- calls --

    def emit_call(self, e: Call, scope: Scope) -> _Frag:
        fn = e.function
        if fn in ("_||_", "_&&_") and self.caps.name == "rust":
            return self.logical_chain(e, scope)
        if fn == "_?._":
            return self.optional_access(e.args[0], e.args[1], scope)
        if fn == "_[?_]":
            return self.optional_access(e.args[0], e.args[1], scope)
        if fn == "_[_]":
            return self.index(e, scope)
        if fn == "dyn":
            return self.emit(e.args[0], scope)
        if fn == "@in" and isinstance(e.args[0], Literal) and e.args[0].kind == "string":
            base = self.resolve(e.args[1], scope)
            if base is not None and base.kind == "domain":
                return _Frag(
                    self.input("has", base.section, base.domain, str(e.args[0].value)), _PREC_MEMBER, 0
                )
        operands = ([e.target] if e.target is not None else []) + e.args
        overloads = self.checked.overloads.get(e.id, [])
        if overloads and all(o.impl is not None for o in overloads):
            return self.library(e, overloads, operands, scope)
        args = [self.emit(x, scope) for x in operands]
        types = [self.type(x) for x in operands]
        if fn in _BINARY:
            return self.operator(e, args, types)
        if fn == "!_":
            operand = self.wrap(args[0], _PREC_UNARY)
            return _Frag(f"!{operand.text}", _PREC_UNARY, operand.depth)
        if fn == "-_":
            if types[0].kind == "double":
                operand = self.wrap(args[0], _PREC_UNARY)
                return _Frag(f"-{operand.text}", _PREC_UNARY, operand.depth)
            # 0 - x fails on the minimum int like cel-go's negation; the Rust engine's -x wraps.
            return self.binary("-", _PREC_ADD, _Frag("0", _PREC_MEMBER, 0), args[0])
        if fn == "_?_:_":
            cond = self.wrap(args[0], _PREC_OR)
            yes = self.wrap(args[1], _PREC_OR)
            no = self.wrap(args[2], _PREC_TERNARY)
            return _Frag(
                f"{cond.text} ? {yes.text} : {no.text}", _PREC_TERNARY, max(cond.depth, yes.depth, no.depth)
            )
        if fn == "size":
            if any(ty.kind in ("string", "dyn", "any", "error", t.PARAM) for ty in types):
                return self.lib_call("_size", runtime.size, args)
            return self.call("size", args)
        if fn == "matches":
            return self.lib_call("_matches", runtime.regex_matches, args)
        if fn in ("int", "uint", "double", "string", "bool", "bytes", "timestamp", "duration"):
            return self.conversion(e, args, overloads)
        if fn == "type":
            return self.call("type", args)
        if fn.startswith("optional.") or fn in ("value", "hasValue", "or", "orValue"):
            return self.optional_call(e, args)
        if fn == "cel.@mapInsert":
            return self.lib_call("_map_insert", runtime.map_insert, args)
        if fn == "@not_strictly_false":
            raise AssertionError("only inside comprehensions, which are lowered as a whole")
        if e.target is not None and any(o.id.endswith("_with_tz") for o in overloads):
            # Neither engine has the time-zone forms of the timestamp getters.
            name = _Frag(_string_literal(fn), _PREC_MEMBER, 0)
            return self.lib_call("_time_getter", runtime.time_getter, [name, *args])
        if e.target is not None:
            call = self.member(args[0], fn, args[1:])
            if (
                self.caps.name == "rust"
                and not self.infallible(operands[0], scope)
                and not all(self.infallible(a, scope) for a in operands[1:])
            ):
                # The Rust engine evaluates a method's arguments before its receiver; cel-go
                # reports the receiver's error first. Evaluate the receiver up front.
                probe = self.wrap(args[0], _PREC_MEMBER)
                return _Frag(
                    f"[{probe.text}].size() == 1 ? {call.text} : false", _PREC_TERNARY, call.depth + 1
                )
            return call
        return self.call(fn, args)

    def operator(self, e: Call, args: list[_Frag], types: list[t.Type]) -> _Frag:
        fn = e.function
        op, prec = _BINARY[fn]
        if self.guarded and fn == "_+_" and types[0].kind in ("string", "bytes", t.LIST):
            return self.lib_call("_concat", _charged_concat, args)
        objects = any(t.may_hold_object(ty) for ty in types)
        if fn in ("_==_", "_!=_"):
            if objects or (not self.caps.cross_numeric and types[0] != types[1]):
                return self.lib_call(
                    "_eq" if fn == "_==_" else "_ne", runtime.eq if fn == "_==_" else runtime.ne, args
                )
        elif fn == "@in":
            container = types[1]
            if container.kind == t.MAP:
                native = container.params[0] == types[0] and types[0].kind in ("string", "int", "bool")
            else:
                native = container.kind == t.LIST and not objects and self.caps.cross_numeric
            if not native:
                return self.lib_call("_in", runtime.in_, args)
        elif fn in _ORDERING and (
            not all(ty.kind in _SAFE_ORDER_KINDS for ty in types)
            or (types[0] != types[1] and not self.caps.cross_numeric)
        ):
            return self.lib_call(*_ORDERING[fn], args)
        elif (
            fn == "_/_"
            and self.caps.name == "celpy"
            and any(ty.kind in ("double", "dyn", "any") for ty in types)
        ):
            # celpy divides a double by zero into +inf whatever the dividend (0.0 / 0.0, -1.0 / 0.0);
            # cel-go follows IEEE 754 (NaN, -Inf).
            return self.lib_call("_div", runtime.divide, args)
        return self.binary(op, prec, args[0], args[1])

    def logical_chain(self, e: Call, scope: Scope) -> _Frag:
        """``a || b || c`` (or ``&&``) with cel-go's choice of error.

        When no term decides the result, cel-go reports the error of the *first* failing term
        (interpreter evalOr/evalAnd), the Rust engine that of the last one it evaluated. Appending
        the fallible terms again in reverse order (``a || b || c || b || a``) makes the last
        failure the leftmost one without changing the value: the tail only runs when no term
        decided, and CEL terms are pure. Terms holding comprehensions stay out of the tail under
        the runtime cost guard, which would charge them twice."""
        terms: list[Expr] = []
        stack: list[Expr] = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, Call) and node.function == e.function and node.target is None:
                stack.extend(reversed(node.args))
            else:
                terms.append(node)
        op, prec = _BINARY[e.function]
        frags = [self.emit(term, scope) for term in terms]
        fallible = [
            i
            for i, term in enumerate(terms)
            if not self.infallible(term, scope)
            and not (self.guarded and any(isinstance(n, Comprehension) for n in walk(term)))
        ]
        order = list(range(len(terms)))
        if len(fallible) > 1:
            order += [i for i in reversed(fallible) if i != len(terms) - 1]
        parts = [self.wrap(frags[i], prec + 1) for i in order]
        text = f" {op} ".join(part.text for part in parts)
        return _Frag(text, prec, max(part.depth for part in parts))

    def infallible(self, e: Expr, scope: Scope) -> bool:
        """Can evaluating ``e`` never produce an error? (Conservative: False when unsure.)"""
        if isinstance(e, Literal):
            return True
        ref = self.resolve(e, scope)
        if ref is not None and ref.kind in ("device", "driver", "multi", "section"):
            return True
        if isinstance(e, Select) and e.test_only:
            ref = self.resolve(e.operand, scope)
            return ref is not None and ref.kind in ("device", "section", "domain")
        if isinstance(e, Call) and e.target is None:
            if e.function in ("_&&_", "_||_", "!_"):
                return all(self.type(a) == t.BOOL and self.infallible(a, scope) for a in e.args)
            if e.function in ("_==_", "_!=_"):
                return not any(t.may_hold_object(self.type(a)) for a in e.args) and all(
                    self.infallible(a, scope) for a in e.args
                )
            if e.function == "@in" and isinstance(e.args[0], Literal) and e.args[0].kind == "string":
                ref = self.resolve(e.args[1], scope)
                return ref is not None and ref.kind in ("section", "domain")
        return False

    def conversion(self, e: Call, args: list[_Frag], overloads: list[OverloadDecl]) -> _Frag:
        if overloads and all(o.id in self.caps.conversions for o in overloads):
            return self.call(e.function, args)
        fn = {"string": runtime.to_string, "bool": runtime.to_bool, "timestamp": runtime.to_timestamp}.get(
            e.function
        )
        if fn is not None:
            return self.lib_call(f"_to_{e.function}", fn, args)
        # Conversions an engine lacks (int(timestamp), double(uint) on celpy...) run cel-go's rules
        # in Python; a uint result stays native so that it keeps its type inside the engine.
        if e.function in ("int", "double", "bytes", "duration"):
            name = _Frag(_string_literal(e.function), _PREC_MEMBER, 0)
            return self.lib_call("_convert", runtime.convert_value, [name, *args])
        return self.call(e.function, args)

    def optional_call(self, e: Call, args: list[_Frag]) -> _Frag:
        fn = e.function
        if self.caps.optional_values:
            if e.target is not None:
                return self.member(args[0], fn, args[1:])
            return self.call(fn, args)
        impl = _OPTIONAL_FUNCTIONS[fn]
        return self.lib_call(re.sub(r"\W", "_", f"_opt_{fn}"), impl, args)

    def optional_access(self, container: Expr, key: Expr, scope: Scope) -> _Frag:
        """``x.?f`` / ``x[?k]``: through device paths when static, else a helper."""
        base = self.resolve(container, scope)
        if base is not None and base.kind == "section":
            domain = self.index_section(base, key, scope)
            return self.optional_of(domain)
        if base is not None and base.kind == "domain" and isinstance(key, Literal) and key.kind == "string":
            present = self.input("has", base.section, base.domain, str(key.value))
            value = self.input("value", base.section, base.domain, str(key.value))
            some = self.optional_of(_Frag(value, _PREC_MEMBER, 0))
            none = self.optional_none()
            return _Frag(f"{present} ? {some.text} : {none.text}", _PREC_TERNARY, max(some.depth, none.depth))
        args = [self.emit(container, scope), self.emit(key, scope)]
        return self.lib_call("_opt_index", runtime.opt_index, args)

    def optional_of(self, frag: _Frag) -> _Frag:
        if self.caps.optional_values:
            return self.call("optional.of", [frag])
        return self.lib_call("_opt_optional_of", _OPTIONAL_FUNCTIONS["optional.of"], [frag])

    def optional_none(self) -> _Frag:
        if self.caps.optional_values:
            return _Frag("optional.none()", _PREC_MEMBER, 1)
        return self.lib_call("_opt_optional_none", _OPTIONAL_FUNCTIONS["optional.none"], [])

    def index(self, e: Call, scope: Scope) -> _Frag:
        container, key = e.args
        base = self.resolve(container, scope)
        if base is not None and base.kind == "section":
            return self.index_section(base, key, scope)
        ctype, ktype = self.type(container), self.type(key)
        target = self.emit(container, scope)
        index = self.emit(key, scope)
        if t.is_optional(ctype):
            return self.lib_call("_opt_chain", runtime.opt_chain, [target, index])
        # celpy indexes lists the Python way (l[-1] is the last element), so only a literal index
        # that cannot be negative stays native there; the Rust engine rejects negatives itself.
        safe_list_index = self.caps.name != "celpy" or (
            isinstance(key, Literal) and isinstance(key.value, int) and key.value >= 0
        )
        native = (ctype.kind == t.LIST and ktype.kind == "int" and safe_list_index) or (
            ctype.kind == t.MAP and ktype == ctype.params[0] and ktype.kind in ("string", "int", "bool")
        )
        if not native:
            return self.lib_call("_index", runtime.index, [target, index])
        target = self.wrap(target, _PREC_MEMBER)
        return _Frag(f"{target.text}[{index.text}]", _PREC_MEMBER, max(target.depth, index.depth) + 1)

    def index_section(self, base: _DevRef, key: Expr, scope: Scope) -> _Frag:
        """``device.attributes[k]`` with a computed k: the domain's map, or an empty map."""
        section = self.input("section", base.section)
        k = self.emit(key, scope)
        if k.depth == 0 and k.prec == _PREC_MEMBER:
            return _Frag(f"({k.text} in {section} ? {section}[{k.text}] : {{}})", _PREC_MEMBER, 2)
        var = self.fresh("l")
        body = f"{var} in {section} ? {section}[{var}] : {{}}"
        return _Frag(f"[{k.text}].map({var}, {body})[0]", _PREC_MEMBER, k.depth + 2)

    def library(self, e: Call, overloads: list[OverloadDecl], operands: list[Expr], scope: Scope) -> _Frag:
        args = [self.emit(x, scope) for x in operands]
        # Under the runtime guard every library call is charged for its actual arguments (the
        # comprehensions' per-iteration charges leave them out).
        charged = self.guarded
        suffix = "_charged" if charged else ""
        folded = None if charged else self.fold(overloads, operands)
        if folded is not None:
            return folded
        # The Rust engine passes uints as plain ints: give the library its UInts back.
        uints = tuple(i for i, x in enumerate(operands) if _holds_uint(self.type(x)))
        if uints and self.caps.name == "rust":
            suffix += "_u" + "_".join(map(str, uints))
        if len(overloads) == 1 and not any(_loose(self.type(x)) for x in operands):
            o = overloads[0]
            assert o.impl is not None
            name = re.sub(r"\W", "_", f"_f_{o.id}{suffix}")
            impl = _retag(o.impl, uints) if suffix.count("_u") else o.impl
            return self.call(self.helper(name, impl, o if charged else None), args)
        name = (
            f"_d_{e.function.replace('.', '_').replace('@', '')}_{len(operands)}_{int(e.target is not None)}"
            f"{suffix}"
        )
        dispatch = _dispatcher(e.function, overloads)
        return self.call(self.helper(name, _retag(dispatch, uints) if suffix.count("_u") else dispatch), args)

    def fold(self, overloads: list[OverloadDecl], operands: list[Expr]) -> _Frag | None:
        """A library call on literals (``quantity("16Gi")``) computed once, at lowering time, and
        passed in as a constant. A call that fails stays in place: its error must only surface
        when (and if) the expression reaches it."""
        if len(overloads) != 1 or not all(isinstance(x, Literal) for x in operands):
            return None
        impl = overloads[0].impl
        assert impl is not None
        try:
            value = impl(*(_literal_value(x) for x in operands))  # type: ignore[arg-type]
        except Exception:
            return None
        name = self.fresh("c")
        self.plan.constants[name] = value
        inp = Input(name, "const")
        self.plan.inputs[name] = inp
        self.unit_inputs[-1][name] = inp
        return _Frag(name, _PREC_MEMBER, 0)

    # -- aggregates --

    def list_literal(self, e: ListExpr, scope: Scope) -> _Frag:
        items = [self.emit(x, scope) for x in e.elements]
        if e.optional_indices:
            flags = (
                "["
                + ", ".join("true" if i in e.optional_indices else "false" for i in range(len(items)))
                + "]"
            )
            return self.lib_call("_opt_list", runtime.opt_list, [_Frag(flags, _PREC_MEMBER, 1), *items])
        depth = max((x.depth for x in items), default=0) + 1
        return _Frag("[" + ", ".join(x.text for x in items) + "]", _PREC_MEMBER, depth)

    def map_literal(self, e: MapExpr, scope: Scope) -> _Frag:
        pairs = [(self.emit(x.key, scope), self.emit(x.value, scope)) for x in e.entries]
        if any(x.optional for x in e.entries) or not self.caps.cross_numeric:
            flags = "[" + ", ".join("true" if x.optional else "false" for x in e.entries) + "]"
            flat = [frag for pair in pairs for frag in pair]
            return self.lib_call("_opt_map", runtime.opt_map, [_Frag(flags, _PREC_MEMBER, 1), *flat])
        depth = max((max(k.depth, v.depth) for k, v in pairs), default=0) + 1
        return _Frag("{" + ", ".join(f"{k.text}: {v.text}" for k, v in pairs) + "}", _PREC_MEMBER, depth)

    # -- comprehensions --

    def comprehension(self, e: Comprehension, scope: Scope) -> _Frag:
        if e.macro in ("bind", "optMap", "optFlatMap"):
            return self.bind(e, scope)
        if self.native_loop(e, scope):
            return self.native_comprehension(e, scope)
        return self.python_loop(e, scope)

    def bind(self, e: Comprehension, scope: Scope) -> _Frag:
        """cel.bind: substitute simple values (a device path, a local, a literal), else evaluate the
        value once in Python and run the body as its own program."""
        init = e.accu_init
        simple = isinstance(init, Literal | Ident) or self.resolve(init, scope) is not None
        if simple:
            inner = dict(scope)
            inner[e.accu_var] = _Inline(init, scope)
            return self.emit(e.result, inner)
        name = self.fresh("bind")
        var = self.fresh("l")
        init_unit, init_captured = self.unit(lambda: self.emit(init, scope))
        inner = dict(scope)
        inner[e.accu_var] = _Var(var)
        body_unit, body_captured = self.unit(lambda: self.emit(e.result, inner), (var,))
        captured = tuple(sorted(set(init_captured) | set(body_captured)))
        self.plan.loops[name] = Loop(name, "bind", captured, init=init_unit, body=body_unit, bind_var=var)
        return self.call(self.helper(name, _unbound), [_Frag(self.use_local(c), 8, 0) for c in captured])

    def native_loop(self, e: Comprehension, scope: Scope) -> bool:
        if self.guarded or e.macro not in _NATIVE_MACROS or e.iter_var2 is not None or e.body is None:
            return False
        if e.guard is not None and e.macro == "map":
            return self.total(e.guard, scope, e) and self.total(e.body, scope, e)
        return self.total(e.body, scope, e)

    def total(self, body: Expr, scope: Scope, loop: Comprehension) -> bool:
        """Can the body never fail? Then the engine's own (non-absorbing) macro is exact."""
        if isinstance(body, Literal):
            return True
        if isinstance(body, Ident):
            return body.name in (loop.iter_var,) or isinstance(scope.get(body.name), _Var)
        if isinstance(body, Call) and body.target is None:
            types = [self.type(a) for a in body.args]
            if body.function in ("_&&_", "_||_", "!_"):
                return all(
                    ty == t.BOOL and self.total(a, scope, loop)
                    for a, ty in zip(body.args, types, strict=True)
                )
            if body.function in ("_==_", "_!=_"):
                return not any(t.may_hold_object(ty) for ty in types) and all(
                    self.total(a, scope, loop) for a in body.args
                )
        if loop.macro == "map" and self.type(body).kind != "error":
            return isinstance(body, Ident) and body.name == loop.iter_var
        return False

    def native_comprehension(self, e: Comprehension, scope: Scope) -> _Frag:
        var = self.fresh("l")
        inner = dict(scope)
        inner[e.iter_var] = _Var(var)
        target = self.wrap(self.emit(e.iter_range, scope), _PREC_MEMBER)
        assert e.body is not None
        self.unit_locals[-1].add(var)
        args = [self.emit(e.guard, inner)] if e.guard is not None else []
        args.append(self.emit(e.body, inner))
        self.unit_locals[-1].discard(var)
        depth = max([target.depth] + [a.depth for a in args]) + 1
        inside = ", ".join([var] + [a.text for a in args])
        return _Frag(f"{target.text}.{e.macro}({inside})", _PREC_MEMBER, depth)

    def python_loop(self, e: Comprehension, scope: Scope) -> _Frag:
        name = self.fresh("loop")
        iter_vars = (self.fresh("l"),) + ((self.fresh("l"),) if e.iter_var2 is not None else ())
        inner = dict(scope)
        inner[e.iter_var] = _Var(iter_vars[0])
        if e.iter_var2 is not None:
            inner[e.iter_var2] = _Var(iter_vars[1])
        target = self.emit(e.iter_range, scope)
        assert e.body is not None
        body_expr = e.body
        body, body_captured = self.unit(lambda: self.emit(body_expr, inner), iter_vars)
        guard: Unit | None = None
        guard_captured: tuple[str, ...] = ()
        if e.guard is not None:
            guard_expr = e.guard
            guard, guard_captured = self.unit(lambda: self.emit(guard_expr, inner), iter_vars)
        captured = tuple(sorted(set(body_captured) | set(guard_captured)))
        charge = self.estimate.loop_charge.get(e.id, 1)
        self.plan.loops[name] = Loop(name, e.macro, captured, iter_vars, body, guard, charge=charge)
        args = [target] + [_Frag(self.use_local(c), _PREC_MEMBER, 0) for c in captured]
        return self.call(self.helper(name, _unbound), args)


def _heights(root: Expr) -> dict[int, int]:
    """Nesting height of every node (leaves 0, each enclosing node one more), computed without
    recursion: an upper bound of the brackets its emission can nest."""
    order = walk(root)
    heights: dict[int, int] = {}
    for node in reversed(order):
        kids = children(node)
        heights[node.id] = 1 + max((heights.get(k.id, 0) for k in kids), default=-1) if kids else 0
    return heights


def _step(base: _DevRef, key: str) -> _DevRef | None:
    if base.kind == "device":
        if key == "driver":
            return _DevRef("driver")
        if key == "allowMultipleAllocations":
            return _DevRef("multi")
        if key in ("attributes", "capacity"):
            return _DevRef("section", key)
        return None
    if base.kind == "section":
        return _DevRef("domain", base.section, key)
    if base.kind == "domain":
        return _DevRef("value", base.section, base.domain, key)
    return None


def _charged_concat(a: Any, b: Any) -> Any:
    """``a + b`` under the runtime guard. cel-go's CostTracker (interpreter/runtimecost.go)
    charges string and bytes concatenation 0.1 per unit of the result's size, charged here before
    it is built; list concatenation costs its flat 1 (O(1) in cel-go, already part of the
    iteration's fixed charge), however long the lists."""
    from policies.cel.engines import current_frame
    from policies.cel.library import CELEvalError

    if isinstance(a, str | bytes) and type(a) is type(b):
        current_frame().charge(math.ceil((len(a) + len(b)) * 0.1))
    elif isinstance(a, list) and isinstance(b, list):
        pass
    else:
        raise CELEvalError(runtime.NO_SUCH_OVERLOAD)
    return a + b


def _literal_value(e: Literal) -> Any:
    from policies.cel.library import UInt

    return UInt(int(e.value)) if e.kind == "uint" else e.value  # type: ignore[call-overload]


def _unbound(*args: Any) -> Any:
    """Placeholder for loop helpers; each engine binds the real implementation."""
    raise AssertionError("loop helpers are bound by the engine")


def _optional_functions() -> dict[str, Callable[..., Any]]:
    from policies.cel.library import CELEvalError, Optional

    def of_non_zero(value: Any) -> Optional:
        """optional.ofNonZeroValue: empty for the zero value of the value's type."""
        zero = value is None or (
            not value if isinstance(value, int | float | str | bytes | list | dict) else False
        )
        return Optional.none() if zero else Optional.of(value)

    def value(opt: Any) -> Any:
        if not isinstance(opt, Optional):
            raise CELEvalError(runtime.NO_SUCH_OVERLOAD)
        return opt.value()

    return {
        "optional.of": Optional.of,
        "optional.none": Optional.none,
        "optional.ofNonZeroValue": of_non_zero,
        "value": value,
        "hasValue": lambda opt: opt.has_value(),
        "or": lambda opt, other: opt.or_(other),
        "orValue": lambda opt, default: opt.or_value(default),
    }


_OPTIONAL_FUNCTIONS = _optional_functions()


def _holds_uint(typ: t.Type) -> bool:
    return typ.kind == "uint" or (typ.kind == t.LIST and bool(typ.params) and _holds_uint(typ.params[0]))


def _as_uint(value: Any) -> Any:
    from policies.cel.library import UInt

    if isinstance(value, list):
        return [_as_uint(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool | UInt) and value >= 0:
        return UInt(value)
    return value


def _retag(fn: Callable[..., Any], positions: tuple[int, ...]) -> Callable[..., Any]:
    """``fn`` with the arguments at ``positions`` (statically uint or lists of uint) made UInts."""

    def retagged(*args: Any) -> Any:
        return fn(*(_as_uint(a) if i in positions else a for i, a in enumerate(args)))

    return retagged


def _loose(typ: t.Type) -> bool:
    """Whether a value of static type ``typ`` may not fit the parameter the checker chose for it
    (``dyn``, ``any`` or a type parameter somewhere in it): such calls check their arguments."""
    return typ.kind in ("dyn", "any", "error", t.PARAM) or any(_loose(p) for p in typ.params)


def _dispatcher(function: str, overloads: list[OverloadDecl]) -> Callable[..., Any]:
    """Pick the overload whose parameter types match the runtime values, as cel-go's runtime type
    guards do (common/decls/decls.go): a single overload is checked too, and no match is
    ``no such overload: <function>(<argument types>)``."""
    from policies.cel.dispatch import matches_type, no_such_overload

    def dispatch(*args: Any) -> Any:
        for o in overloads:
            if all(matches_type(a, p) for a, p in zip(args, o.params, strict=True)):
                assert o.impl is not None
                return o.impl(*args)
        raise no_such_overload(function, args)

    return dispatch


def lower(
    checked: Checked, estimate: Estimate, caps: Capabilities, limit: int, guarded: bool = False
) -> Plan:
    """Lower for an engine. Programs whose estimate exceeds ``limit`` (or all, with ``guarded``)
    run every comprehension from Python and account for cost as they go."""
    return _Lowering(checked, estimate, caps, guarded or estimate.max > limit, limit).run()
