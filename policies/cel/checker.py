"""draguard's CEL type checker: cel-go's checker rules plus the validators Kubernetes enables.

Neither engine type-checks, yet cel-go rejects at compile time what they would happily run (or
fail on later): undeclared names, calls with no matching overload, field selections on scalars,
mixed-type list literals, iteration over ``any``-typed attributes, invalid regex/duration/timestamp
literals, conversions of literals that cannot succeed, format strings that do not fit their
arguments, and results that are neither bool nor the attribute type. The algorithm is cel-go's
(``checker/checker.go``): every overload is tried with fresh type parameters, the first match
fixes the result type, several matches with different results widen it to ``dyn``.

The checked tree records, per node, its type and (for calls) the candidate overloads, which the
cost estimator and the lowering to each engine use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.cel import decls
from policies.cel import types as t
from policies.cel.conversions import fold_conversion
from policies.cel.environment import Environment
from policies.cel.errors import CompileError
from policies.cel.library import CELEvalError, StaticArg, compile_regex, format_static_error
from policies.cel.parser import join_errors
from policies.cel.syntax import (
    OPT_SELECT,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapExpr,
    Select,
    StructExpr,
    walk,
)
from policies.cel.types import Mapping, Type

_LITERAL_TYPES = {
    "int": t.INT,
    "uint": t.UINT,
    "double": t.DOUBLE,
    "string": t.STRING,
    "bytes": t.BYTES,
    "bool": t.BOOL,
    "null": t.NULL,
}
CONVERSION_FUNCTIONS = frozenset(
    {"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration", "dyn", "type"}
)
# cel-go's ValidateRegexLiterals checks the literal patterns of `matches` while checking; the
# Kubernetes find/findAll compile theirs when the program is built (cel.OptimizeRegex), so a bad
# one is "program instantiation failed", without a position.
_REGEX_FUNCTIONS = {"matches": "matches"}
_PROGRAM_REGEX_FUNCTIONS = frozenset({"find", "findAll"})


@dataclass
class Checked:
    """A type-checked expression: ``types`` and ``overloads`` are keyed by node id."""

    root: Expr
    source: str
    env: Environment
    types: dict[int, Type] = field(default_factory=dict)
    overloads: dict[int, list[decls.OverloadDecl]] = field(default_factory=dict)
    # Names bound by comprehensions/binds, per Ident node id (so the lowering can tell them from
    # `device`).
    locals: set[int] = field(default_factory=set)

    @property
    def output(self) -> Type:
        return self.types[self.root.id]

    def type(self, e: Expr) -> Type:
        return self.types[e.id]


class _Checker:
    def __init__(self, source: str, env: Environment) -> None:
        self.source = source
        self.env = env
        self.functions = decls.functions(env.declares_includes)
        self.device_fields = decls.device_fields(env)
        self.mapping = Mapping()
        self.scopes: list[dict[str, Type]] = []
        self.errors: list[tuple[int, str]] = []
        self.fresh = 0
        self.checked: Checked | None = None

    # -- bookkeeping --

    def error(self, e: Expr | int, message: str) -> None:
        self.errors.append((e if isinstance(e, int) else e.offset, message))

    def set(self, e: Expr, typ: Type) -> None:
        assert self.checked is not None
        self.checked.types[e.id] = typ

    def get(self, e: Expr) -> Type:
        assert self.checked is not None
        return self.checked.types[e.id]

    def lookup_local(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def new_var(self) -> Type:
        self.fresh += 1
        return t.param(f"_var{self.fresh}")

    def assignable(self, a: Type, b: Type) -> bool:
        found = t.is_assignable(self.mapping, a, b)
        if found is None:
            return False
        self.mapping = found
        return True

    def sub(self, typ: Type) -> Type:
        return t.substitute(self.mapping, typ, False)

    # -- the walk --

    def run(self, root: Expr) -> Checked:
        self.checked = Checked(root, self.source, self.env)
        self.check(root)
        for key, typ in self.checked.types.items():
            self.checked.types[key] = t.substitute(self.mapping, typ, True)
        return self.checked

    def check(self, e: Expr) -> None:
        if isinstance(e, Literal):
            self.set(e, _LITERAL_TYPES[e.kind])
        elif isinstance(e, Ident):
            self.check_ident(e)
        elif isinstance(e, Select):
            self.check_select(e)
        elif isinstance(e, Call):
            self.check_call(e)
        elif isinstance(e, ListExpr):
            self.check_list(e)
        elif isinstance(e, MapExpr):
            self.check_map(e)
        elif isinstance(e, Comprehension):
            self.check_comprehension(e)
        else:
            assert isinstance(e, StructExpr)
            for _, value in e.fields:
                self.check(value)
            self.error(e, f"undeclared reference to '{e.type_name}' (in container '')")
            self.set(e, t.ERROR)

    def check_ident(self, e: Ident) -> None:
        # A leading dot names the root scope: `.device` is the variable even where a local
        # `device` shadows it.
        name = e.name.removeprefix(".")
        local = None if e.name.startswith(".") else self.lookup_local(name)
        if local is not None:
            assert self.checked is not None
            self.checked.locals.add(e.id)
            self.set(e, local)
        elif name == "device":
            self.set(e, t.DEVICE)
        elif name in decls.TYPE_IDENTS:
            self.set(e, decls.TYPE_IDENTS[name])
        else:
            self.error(e, f"undeclared reference to '{e.name}' (in container '')")
            self.set(e, t.ERROR)

    def select_field(self, e: Expr, operand: Expr, name: str, optional: bool) -> Type:
        self.check(operand)
        target = self.sub(self.get(operand))
        is_opt = t.is_optional(target)
        if is_opt:
            target = target.params[0]
        if target.kind == t.MAP:
            result = target.params[1]
        elif target == t.DEVICE:
            if name in self.device_fields:
                result = self.device_fields[name]
            else:
                self.error(e, f"undefined field '{name}'")
                result = t.ERROR
        elif target.kind == t.PARAM:
            self.assignable(t.DYN, target)
            result = t.DYN
        else:
            if not t.is_dyn_or_error(target):
                self.error(e, f"type '{t.format_type(target)}' does not support field selection")
            result = t.DYN
        return t.optional_of(result) if is_opt or optional else result

    def check_select(self, e: Select) -> None:
        result = self.select_field(e, e.operand, e.field, False)
        self.set(e, t.BOOL if e.test_only else self.sub(result))

    def check_call(self, e: Call) -> None:
        if e.function == OPT_SELECT:
            field_arg = e.args[1]
            assert isinstance(field_arg, Literal)
            self.check(field_arg)
            self.set(e, self.sub(self.select_field(e, e.args[0], str(field_arg.value), True)))
            return
        for arg in e.args:
            self.check(arg)
        if e.target is None:
            fn = self.functions.get(e.function)
            if fn is None:
                self.error(e, f"undeclared reference to '{e.function}' (in container '')")
                self.set(e, t.ERROR)
                return
            self.resolve(e, fn, None)
            return
        qualified = _qualified_name(e.target)
        if qualified is not None and qualified + "." + e.function in self.functions:
            e.function = qualified + "." + e.function
            e.target = None
            self.resolve(e, self.functions[e.function], None)
            return
        self.check(e.target)
        fn = self.functions.get(e.function)
        if fn is None:
            self.error(e, f"undeclared reference to '{e.function}' (in container '')")
            self.set(e, t.ERROR)
            return
        self.resolve(e, fn, e.target)

    def resolve(self, e: Call, fn: decls.FunctionDecl, target: Expr | None) -> None:
        arg_types = ([self.get(target)] if target is not None else []) + [self.get(a) for a in e.args]
        result: Type | None = None
        matched: list[decls.OverloadDecl] = []
        for overload in fn.overloads:
            if overload.member != (target is not None) or len(overload.params) != len(arg_types):
                continue
            renames = t.Mapping({name: self.new_var() for name in overload.type_params})
            params = [t.substitute(renames, p, False) for p in overload.params]
            found = t.is_assignable_list(self.mapping, arg_types, params)
            if found is None:
                continue
            self.mapping = found
            matched.append(overload)
            res = t.substitute(self.mapping, t.substitute(renames, overload.result, False), False)
            if result is None:
                result = res
            elif not t.is_dyn(result) and res != result:
                result = t.DYN
        if result is None:
            shown = [t.format_type(t.substitute(self.mapping, a, True)) for a in arg_types]
            signature = (
                f"{shown[0]}.({', '.join(shown[1:])})" if target is not None else f"({', '.join(shown)})"
            )
            self.error(e, f"found no matching overload for '{fn.name}' applied to '{signature}'")
            self.set(e, t.ERROR)
            return
        assert self.checked is not None
        self.checked.overloads[e.id] = matched
        self.set(e, result)

    def join(self, e: Expr, previous: Type | None, current: Type) -> Type:
        if previous is None:
            return current
        if self.assignable(previous, current):
            return t.most_general(previous, current)
        self.error(e, f"expected type '{t.format_type(previous)}' but found '{t.format_type(current)}'")
        return t.ERROR

    def unwrap_optional_entry(self, e: Expr, typ: Type) -> Type:
        if t.is_optional(typ):
            return typ.params[0]
        if not t.is_dyn(typ):
            self.error(
                e, f"expected type '{t.format_type(t.optional_of(typ))}' but found '{t.format_type(typ)}'"
            )
        return typ

    def check_list(self, e: ListExpr) -> None:
        elem: Type | None = None
        for i, item in enumerate(e.elements):
            self.check(item)
            typ = self.get(item)
            if i in e.optional_indices:
                typ = self.unwrap_optional_entry(item, typ)
            elem = self.join(item, elem, typ)
        self.set(e, t.list_of(elem if elem is not None else self.new_var()))

    def check_map(self, e: MapExpr) -> None:
        key: Type | None = None
        value: Type | None = None
        for entry in e.entries:
            self.check(entry.key)
            key = self.join(entry.key, key, self.get(entry.key))
            self.check(entry.value)
            typ = self.get(entry.value)
            if entry.optional:
                typ = self.unwrap_optional_entry(entry.value, typ)
            value = self.join(entry.value, value, typ)
        if key is None or value is None:
            self.set(e, t.map_of(self.new_var(), self.new_var()))
        else:
            self.set(e, t.map_of(key, value))

    def check_comprehension(self, e: Comprehension) -> None:
        self.check(e.iter_range)
        self.check(e.accu_init)
        range_type = self.sub(self.get(e.iter_range))
        accu_type = self.get(e.accu_init)
        self.scopes.append({e.accu_var: accu_type})
        var2: Type | None = None
        if range_type.kind == t.LIST:
            var = range_type.params[0]
            if e.iter_var2 is not None:
                var, var2 = t.INT, var
        elif range_type.kind == t.MAP:
            var = range_type.params[0]
            var2 = range_type.params[1]
        elif range_type.kind in ("dyn", "error", t.PARAM):
            self.assignable(t.DYN, range_type)
            var = var2 = t.DYN
        else:
            self.error(
                e.iter_range,
                f"expression of type '{t.format_type(range_type)}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)",
            )
            var = var2 = t.ERROR
        loop_scope = {e.iter_var: var}
        if e.iter_var2 is not None:
            loop_scope[e.iter_var2] = var2 or t.ERROR
        self.scopes.append(loop_scope)
        self.check(e.loop_condition)
        self.assert_type(e.loop_condition, t.BOOL)
        self.check(e.loop_step)
        self.assert_type(e.loop_step, accu_type)
        self.scopes.pop()
        self.check(e.result)
        self.scopes.pop()
        self.set(e, self.sub(self.get(e.result)))

    def assert_type(self, e: Expr, expected: Type) -> None:
        actual = self.get(e)
        if not self.assignable(expected, actual):
            self.error(e, f"expected type '{t.format_type(expected)}' but found '{t.format_type(actual)}'")


def _qualified_name(e: Expr) -> str | None:
    """``a.b.c`` as a dotted name if the expression is only identifiers and selections."""
    if isinstance(e, Ident):
        return e.name
    if isinstance(e, Select) and not e.test_only:
        prefix = _qualified_name(e.operand)
        return None if prefix is None else prefix + "." + e.field
    return None


# --- validators (cel-go ASTValidators enabled by the Kubernetes base environment) -----------------


def _validate(checked: Checked) -> list[tuple[int, str]]:
    errors: list[tuple[int, str]] = []
    exempt: set[int] = set()
    for node in walk(checked.root):
        if isinstance(node, Call) and node.function == "format" and node.target is not None:
            exempt.update(n.id for arg in node.args for n in walk(arg))
    for node in walk(checked.root):
        if isinstance(node, ListExpr) and node.id not in exempt:
            _homogeneous(
                checked, [(item, i in node.optional_indices) for i, item in enumerate(node.elements)], errors
            )
        elif isinstance(node, MapExpr) and node.id not in exempt:
            _homogeneous(checked, [(entry.key, False) for entry in node.entries], errors)
            _homogeneous(checked, [(entry.value, entry.optional) for entry in node.entries], errors)
        elif isinstance(node, Call):
            _validate_call(checked, node, errors)
    return errors


def _homogeneous(checked: Checked, items: list[tuple[Expr, bool]], errors: list[tuple[int, str]]) -> None:
    first: Type | None = None
    for item, optional in items:
        typ = checked.type(item)
        if optional and t.is_optional(typ):
            typ = typ.params[0]
        if first is None:
            first = typ
        elif typ != first:
            errors.append(
                (item.offset, f"expected type '{t.format_type(first)}' but found '{t.format_type(typ)}'")
            )
            return


def _literal_arg(call: Call, index: int) -> Literal | None:
    operands = ([call.target] if call.target is not None else []) + call.args
    if index < len(operands) and isinstance(operands[index], Literal):
        return operands[index]  # type: ignore[return-value]
    return None


def _validate_call(checked: Checked, call: Call, errors: list[tuple[int, str]]) -> None:
    name = call.function
    if name in _REGEX_FUNCTIONS:
        pattern = _literal_arg(call, 1)
        if pattern is not None and isinstance(pattern.value, str):
            try:
                compile_regex(pattern.value)
            except CELEvalError as exc:
                errors.append((pattern.offset, f"invalid {name} argument: {exc}"))
    elif name in ("duration", "timestamp") and call.args and isinstance(call.args[0], Literal):
        if call.args[0].kind == "string":
            _fold(checked, call, errors, f"invalid {name} argument")
    elif name == "format" and call.target is not None:
        _validate_format(checked, call, errors)


def _fold(checked: Checked, call: Call, errors: list[tuple[int, str]], prefix: str) -> None:
    arg = call.args[0]
    assert isinstance(arg, Literal)
    problem = fold_conversion(call.function, arg.value, arg.kind)
    if problem is not None:
        errors.append((call.offset, f"{prefix}: {problem}" if prefix else problem))


def _static_arg(checked: Checked, e: Expr) -> StaticArg:
    typ = checked.type(e)
    inner: tuple[StaticArg, ...] = ()
    if isinstance(e, ListExpr):
        inner = tuple(_static_arg(checked, x) for x in e.elements)
    elif isinstance(e, MapExpr):
        inner = tuple(_static_arg(checked, x) for entry in e.entries for x in (entry.key, entry.value))
    # cel-go's stringFormatChecker compares kinds and names a bad argument by its runtime type name
    # (ext/formatting.go: c.typeOf(id).TypeName()): google.protobuf.Duration, null_type, list...
    return StaticArg(t.type_string(typ), inner)


def _validate_format(checked: Checked, call: Call, errors: list[tuple[int, str]]) -> None:
    template = call.target
    if not (isinstance(template, Literal) and template.kind == "string") or not call.args:
        return
    args = call.args[0]
    if not isinstance(args, ListExpr):
        return
    problem = format_static_error(str(template.value), [_static_arg(checked, x) for x in args.elements])
    if problem is not None:
        errors.append((call.offset, problem))


def _plan_conversions(checked: Checked) -> str | None:
    """cel-go's planner folds type conversions of constant arguments and fails the program when
    one cannot succeed (interpreter ``maybeOptimizeConstUnary``), even in an untaken branch."""
    for node in walk(checked.root):
        if isinstance(node, Call) and node.function in _PROGRAM_REGEX_FUNCTIONS and node.target is not None:
            pattern = _literal_arg(node, 1)
            if pattern is not None and isinstance(pattern.value, str):
                try:
                    compile_regex(pattern.value)
                except CELEvalError as exc:
                    return str(exc)
        if (
            isinstance(node, Call)
            and node.target is None
            and node.function in CONVERSION_FUNCTIONS
            and len(node.args) == 1
            and isinstance(node.args[0], Literal)
        ):
            literal = node.args[0]
            problem = fold_conversion(node.function, literal.value, literal.kind)
            if problem is not None:
                return problem
    return None


def _output_allowed(checked: Checked) -> bool:
    """compile.go: bool, or the unknown type (any; dyn too with DRAListTypeAttributes)."""
    out = checked.output
    return out == t.BOOL or out.kind == "any" or (checked.env.list_type_attributes and out.kind == "dyn")


def check(root: Expr, source: str, env: Environment) -> Checked:
    """Type-check and validate; raises CompileError worded like the Kubernetes DRA package."""
    checker = _Checker(source, env)
    checked = checker.run(root)
    errors = checker.errors or _validate(checked)
    if errors:
        raise _compile_error(source, errors)
    if not _output_allowed(checked):
        raise CompileError(f"must evaluate to bool or the unknown type, not {t.type_string(checked.output)}")
    problem = _plan_conversions(checked)
    if problem is not None:
        raise CompileError(f"program instantiation failed: {problem}")
    return checked


def _compile_error(source: str, errors: list[tuple[int, str]]) -> CompileError:
    """All issues, sorted by position, joined like cel-go's Issues.String()."""
    joined = join_errors(source, errors)
    return CompileError("compilation failed: " + joined.message, joined.column, joined.line)
