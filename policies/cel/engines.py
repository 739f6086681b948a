"""Running lowered plans on the two engines: the Rust ``cel`` package and ``celpy``.

Both run the same plan (``policies.cel.lower``). What differs is the value boundary: the Rust
engine only holds CEL-convertible values, so Kubernetes objects (Quantity, Semver, URL...) cross
it as handles into the current evaluation's table; celpy holds its own ``celtypes`` and passes
other Python objects through. Helper functions see plain Python values on both.

One evaluation is a ``Frame`` (thread-local while it runs): the device's bound inputs, the object
handles, the messages of errors raised by helpers (the engines only carry a token), and the cost
counter of the runtime guard. Comprehensions and binds that the lowering left to Python run here,
with cel-go's semantics: errors inside ``all``/``exists`` are absorbed when another element
decides the result, ``map``/``filter``/``exists_one`` fail on any error, a bound value that fails
only matters if the body reads it.
"""

from __future__ import annotations

import datetime
import importlib.machinery
import importlib.util
import logging
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from policies.api.quantity import Quantity
from policies.cel.binding import ABSENT
from policies.cel.library import CIDR, IP, URL, CallSite, CELEvalError, NamedFormat, Optional, Semver, UInt
from policies.cel.lower import Capabilities, Helper, Input, Loop, Plan, Unit


def _rust_extension() -> ModuleType:
    """The Rust engine's compiled module ``cel.cel``, loaded without running the ``cel`` package's
    ``__init__``: that also imports the package's interactive shell (typer, rich, prompt_toolkit,
    pygments), which takes longer to load than a small ``draguard validate`` takes to run. The
    module is registered under its own name, so a later ``import cel`` finds it and reuses it."""
    if "cel.cel" in sys.modules:
        return sys.modules["cel.cel"]
    package = importlib.util.find_spec("cel")  # locates the package without importing it
    locations = package.submodule_search_locations if package is not None else None
    spec = importlib.machinery.PathFinder.find_spec("cel.cel", list(locations or []))
    if spec is None or spec.loader is None:
        raise ImportError("the Rust CEL engine (package common-expression-language) is not installed")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["cel.cel"] = module
    return module


rust_cel = _rust_extension()

# The Rust engine logs every failing Python callback at WARNING; here a failing callback is an
# ordinary CEL runtime error, reported through EvalError.
logging.getLogger("cel").disabled = True

COST_LIMIT = 1_000_000  # CELSelectorExpressionMaxCost
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"  # interpreter.EvalCancelledError
_MAX_COST = (1 << 64) - 1
_TOKEN = "\u00a7E"  # marks a helper error inside an engine's error text
TOKEN_RE = re.compile(_TOKEN + r"(\d+)")
MISSING: Any = object()  # an input the device does not have
_OBJECT_TYPES = (Quantity, Semver, URL, IP, CIDR, NamedFormat)
_HANDLE = "\x00handle"


class UnitError(Exception):
    """An engine program failed; ``message`` is cel-go's wording of the error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CostExceeded(Exception):
    """The runtime guard tripped; not a CEL error value, it ends the evaluation."""


@dataclass
class Frame:
    """The state of one evaluation."""

    values: dict[str, Any]  # bound inputs, already encoded for the engine
    guarded: bool
    limit: int = COST_LIMIT
    cost: int = 0
    exceeded: bool = False
    handles: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def token(self, message: str) -> str:
        self.errors.append(message)
        return f"{_TOKEN}{len(self.errors) - 1}"

    def charge(self, amount: int) -> None:
        self.cost = min(self.cost + amount, _MAX_COST)  # saturating, like cel-go's uint64 sums
        if self.cost > self.limit:
            self.exceeded = True
            raise CostExceeded(COST_EXCEEDED)


_state = threading.local()


def current_frame() -> Frame:
    frame: Frame = _state.frame
    return frame


def go_type_name(value: Any) -> str:
    """cel-go's Go type name of a value, as in "got 'types.Int', expected iterable type"."""
    if isinstance(value, bool):
        return "types.Bool"
    if isinstance(value, UInt):
        return "types.Uint"
    names: list[tuple[type | tuple[type, ...], str]] = [
        (int, "types.Int"),
        (float, "types.Double"),
        (str, "types.String"),
        (bytes, "types.Bytes"),
        (Semver, "cel.Semver"),
        (Quantity, "cel.Quantity"),
        (URL, "cel.URL"),
        (IP, "cel.IP"),
        (CIDR, "cel.CIDR"),
        (Optional, "*types.Optional"),
        (datetime.datetime, "types.Timestamp"),
        (datetime.timedelta, "types.Duration"),
    ]
    for cls, name in names:
        if isinstance(value, cls):
            return name
    return "types.Null" if value is None else type(value).__name__


class Engine:
    """The engine-specific parts: compiling a unit, running it, converting values."""

    name = ""
    caps: Capabilities

    def compile(self, source: str, functions: dict[str, Callable[..., Any]]) -> Any:
        """A runnable program for ``source`` calling the given engine functions."""
        raise NotImplementedError

    def run(self, compiled: Any, variables: dict[str, Any]) -> Any:
        """Execute with engine-encoded variables; raise UnitError on failure."""
        raise NotImplementedError

    def encode(self, value: Any, frame: Frame) -> Any:
        raise NotImplementedError

    def decode(self, value: Any, frame: Frame) -> Any:
        raise NotImplementedError

    def callable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a Python function taking/returning plain values as an engine function."""
        raise NotImplementedError


# --- the Rust engine ----------------------------------------------------------------------------------

_RUST_CONVERSIONS = frozenset(
    {
        "int64_to_int64",
        "uint64_to_int64",
        "double_to_int64",
        "string_to_int64",
        "uint64_to_uint64",
        "int64_to_uint64",
        "double_to_uint64",
        "string_to_uint64",
        "double_to_double",
        "int64_to_double",
        "uint64_to_double",
        "string_to_double",
        "string_to_string",
        "int64_to_string",
        "uint64_to_string",
        "bytes_to_string",
        "bytes_to_bytes",
        "string_to_bytes",
        "timestamp_to_timestamp",
        "string_to_timestamp",
        "duration_to_duration",
        "string_to_duration",
    }
)

_RUST_ERRORS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"^KeyError: '?(.*?)'?$", re.S), lambda m: f"no such key: {m.group(1)}"),
    (re.compile(r"division by zero"), lambda m: "division by zero"),
    (re.compile(r"modulo by zero"), lambda m: "modulus by zero"),
    (re.compile(r"Arithmetic overflow|integer overflow"), lambda m: "integer overflow"),
    (re.compile(r"unsigned integer overflow"), lambda m: "unsigned integer overflow"),
    (re.compile(r"index out of bounds: (\S+)"), lambda m: f"index out of bounds: {m.group(1)}"),
    (
        re.compile(r"No such overload|Unsupported operation|Unexpected type|Cannot mix signed and unsigned"),
        lambda m: "no such overload",
    ),
]


class RustEngine(Engine):
    name = "rust"
    caps = Capabilities(
        "rust",
        optional_values=True,
        cross_numeric=True,
        presence_errors=True,
        max_nesting=40,  # its parser fails near 100 nested brackets
        typed_values=False,
        conversions=_RUST_CONVERSIONS,
    )

    def compile(self, source: str, functions: dict[str, Callable[..., Any]]) -> Any:
        return rust_cel.compile(source), functions

    def run(self, compiled: Any, variables: dict[str, Any]) -> Any:
        program, functions = compiled
        try:
            return program.execute({**variables, **functions})
        except CostExceeded:
            raise
        except Exception as exc:  # the engine raises builtin exception types for CEL errors
            raise UnitError(self.error_text(f"{type(exc).__name__}: {exc}")) from None

    def error_text(self, text: str) -> str:
        token = TOKEN_RE.search(text)
        if token is not None:
            return current_frame().errors[int(token.group(1))]
        undefined = re.search(r"Undefined variable or function: '([^']+)'", text)
        if undefined is not None:
            return f"\x00undefined {undefined.group(1)}"
        if text.startswith("KeyError"):
            return f"no such key: {text.split(': ', 1)[1].strip(chr(39))}"
        for pattern, wording in _RUST_ERRORS[1:]:
            found = pattern.search(text)
            if found is not None:
                return wording(found)
        return text.split(". ")[0]

    def encode(self, value: Any, frame: Frame) -> Any:
        if isinstance(value, _OBJECT_TYPES):
            frame.handles.append(value)
            return {_HANDLE: len(frame.handles) - 1}
        if isinstance(value, Optional):
            if value.has_value():
                return rust_cel.OptionalValue.of(self.encode(value.value(), frame))
            return rust_cel.OptionalValue.none()
        if isinstance(value, list | tuple):
            return [self.encode(v, frame) for v in value]
        if isinstance(value, Mapping):
            return {k: self.encode(v, frame) for k, v in value.items()}
        if isinstance(value, UInt):
            return int(value)
        return value

    def decode(self, value: Any, frame: Frame) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and _HANDLE in value:
                return frame.handles[value[_HANDLE]]
            return {k: self.decode(v, frame) for k, v in value.items()}
        if isinstance(value, list):
            return [self.decode(v, frame) for v in value]
        if isinstance(value, rust_cel.OptionalValue):
            return Optional.of(self.decode(value.value(), frame)) if value.has_value() else Optional.none()
        return value

    def callable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def call(*args: Any) -> Any:
            frame = current_frame()
            try:
                return engine.encode(fn(*(engine.decode(a, frame) for a in args)), frame)
            except CostExceeded:
                raise RuntimeError(frame.token(COST_EXCEEDED)) from None
            except UnitError as exc:
                raise RuntimeError(frame.token(exc.message)) from None
            except CELEvalError as exc:
                raise RuntimeError(frame.token(str(exc))) from None
            except (TypeError, ValueError, AttributeError, KeyError, IndexError):
                raise RuntimeError(frame.token("no such overload")) from None

        return call


def _celpy() -> Engine:
    # cel-python costs 16 MB and a third of a second to import; only a config that selects it pays.
    from policies.cel.celpy_engine import CelpyEngine

    return CelpyEngine()


ENGINES: dict[str, Callable[[], Engine]] = {"rust": RustEngine, "celpy": _celpy}


# --- executing a plan -------------------------------------------------------------------------------


def input_value(inp: Input, binding: Any) -> Any:
    """The Python value of one input for a device binding (``MISSING`` when absent)."""
    kind = inp.kind
    if kind == "driver":
        return binding.driver
    if kind == "multi":
        return binding.allow_multiple_allocations
    if kind == "device":
        return {
            "driver": binding.driver,
            "attributes": binding.attributes,
            "capacity": binding.capacity,
            "allowMultipleAllocations": binding.allow_multiple_allocations,
        }
    if kind in ("value", "has"):
        value = binding.value(inp.section, inp.domain, inp.ident)
        return value is not ABSENT if kind == "has" else (MISSING if value is ABSENT else value)
    section = binding.attributes if inp.section == "attributes" else binding.capacity
    return section if kind == "section" else section.get(inp.domain, {})


class Runner:
    """A plan compiled for one engine."""

    def __init__(self, plan: Plan, engine: Engine) -> None:
        self.plan = plan
        self.engine = engine
        self.functions: dict[str, Callable[..., Any]] = {}
        for name, helper in plan.helpers.items():
            if name in plan.loops:
                self.functions[name] = engine.callable(self.loop_function(plan.loops[name]))
            else:
                self.functions[name] = engine.callable(self.charged(helper))
        self.compiled: dict[int, Any] = {}
        for unit in self.units():
            used = {name: fn for name, fn in self.functions.items() if name + "(" in unit.source}
            self.compiled[id(unit)] = (engine.compile(unit.source, used), tuple(i.name for i in unit.inputs))

    def units(self) -> list[Unit]:
        out = [self.plan.main]
        for loop in self.plan.loops.values():
            out += [u for u in (loop.init, loop.body, loop.guard) if u is not None]
        return out

    def charged(self, helper: Helper) -> Callable[..., Any]:
        """Charge a library call's cost: its estimate for these arguments before (so a call that
        would blow the limit never runs), its actual cost after."""
        fn = helper.fn
        rule = helper.overload.cost if helper.overload is not None else None
        if rule is None:
            return fn

        def charged(*args: Any) -> Any:
            frame = current_frame()
            worst = rule.estimate(_runtime_site(args))[1]
            if frame.cost + worst > frame.limit:
                frame.charge(worst)
            result = fn(*args)
            frame.charge(rule.actual(args, result))
            return result

        return charged

    # -- evaluation --

    def evaluate(self, binding: Any) -> Any:
        """Run the main program for a binding; returns the Python value or raises UnitError."""
        return self.evaluate_with_cost(binding)[0]

    def evaluate_with_cost(self, binding: Any) -> tuple[Any, int]:
        """The value and the cost the runtime guard accounted (comprehension iterations and
        calls charged at run time; zero for plans that run entirely natively)."""
        values: dict[str, Any] = {}
        frame = Frame(values, self.plan.guarded, self.plan.limit)
        previous = getattr(_state, "frame", None)
        _state.frame = frame
        try:
            for name, inp in self.plan.inputs.items():
                value = self.plan.constants[name] if inp.kind == "const" else input_value(inp, binding)
                if value is not MISSING:
                    values[name] = self.engine.encode(value, frame)
            try:
                result = self.run_unit(self.plan.main, {})
            except UnitError as exc:
                if frame.exceeded:
                    raise UnitError(COST_EXCEEDED) from None
                raise UnitError(self.public_message(exc.message)) from None
            if frame.exceeded:
                raise UnitError(COST_EXCEEDED)
            return result, frame.cost
        finally:
            _state.frame = previous

    def public_message(self, message: str) -> str:
        """Undefined input variables are the missing keys cel-go reports."""
        if message.startswith("\x00undefined "):
            name = message.split(" ", 1)[1]
            inp = self.plan.inputs.get(name)
            return f"no such key: {inp.ident}" if inp is not None else f"undeclared reference to '{name}'"
        return message

    def run_unit(self, unit: Unit, params: dict[str, Any]) -> Any:
        """Run one program with decoded local values; returns a decoded value or raises UnitError."""
        frame = current_frame()
        compiled, names = self.compiled[id(unit)]
        values = frame.values
        variables = {name: values[name] for name in names if name in values}
        encode = self.engine.encode
        for name, value in params.items():
            if value is not MISSING:
                variables[name] = encode(value, frame)
        return self.engine.decode(self.engine.run(compiled, variables), frame)

    # -- comprehensions and binds run from Python --

    def loop_function(self, loop: Loop) -> Callable[..., Any]:
        if loop.kind == "bind":
            return lambda *captured: self.run_bind(loop, dict(zip(loop.captured, captured, strict=True)))
        if loop.kind == "sub":
            body = loop.body
            assert body is not None
            return lambda *captured: self.run_unit(body, dict(zip(loop.captured, captured, strict=True)))

        def run(target: Any, *captured: Any) -> Any:
            return self.run_loop(loop, target, dict(zip(loop.captured, captured, strict=True)))

        return run

    def run_bind(self, loop: Loop, captured: dict[str, Any]) -> Any:
        assert loop.init is not None and loop.body is not None
        try:
            value = self.run_unit(loop.init, captured)
            failure = None
        except UnitError as exc:
            value, failure = MISSING, exc
        try:
            return self.run_unit(loop.body, {**captured, loop.bind_var: value})
        except UnitError as exc:
            if failure is not None and exc.message == f"\x00undefined {loop.bind_var}":
                raise failure from None
            raise

    def run_loop(self, loop: Loop, target: Any, captured: dict[str, Any]) -> Any:
        frame = current_frame()
        rows = _iteration_rows(target, len(loop.iter_vars))
        kind = loop.kind
        assert loop.body is not None
        body = _Step(self, loop.body, loop.iter_vars)
        guard = _Step(self, loop.guard, loop.iter_vars) if loop.guard is not None else None
        error: UnitError | None = None
        count = 0
        out_list: list[Any] = []
        out_map: dict[Any, Any] = {}
        for row in rows:
            frame.charge(loop.charge)
            params = {**captured, **dict(zip(loop.iter_vars, row, strict=True))}
            if guard is not None:
                keep = guard.run(params)
                if isinstance(keep, UnitError):
                    error = error or keep
                    continue
                if keep is not True:
                    if keep is not False:
                        error = error or UnitError("no such overload")
                    continue
            value = body.run(params)
            if isinstance(value, UnitError):
                error = error or value
                continue
            if kind in ("all", "exists"):
                if not isinstance(value, bool):
                    error = error or UnitError("no such overload")
                elif value is (kind == "exists"):
                    return value
            elif kind in ("exists_one", "filter"):
                if not isinstance(value, bool):
                    error = error or UnitError("no such overload")
                elif value:
                    count += 1
                    out_list.append(row[0])
            elif kind in ("map", "transformList"):
                out_list.append(value)
            elif kind == "transformMap":
                out_map = _insert(out_map, {row[0]: value})
            elif not isinstance(value, Mapping):  # transformMapEntry
                error = error or UnitError("no such overload")
            else:
                out_map = _insert(out_map, value)
        if error is not None:
            raise error
        if kind in ("all", "exists"):
            return kind == "all"
        if kind == "exists_one":
            return count == 1
        return out_map if kind in ("transformMap", "transformMapEntry") else out_list


class _Step:
    """One loop program (body or guard) within one run of a comprehension.

    A program that reads none of the iteration variables computes the same outcome on every
    iteration (CEL is pure), so it runs once; later iterations reuse the outcome and are charged
    the cost that first run accounted for, as if it had run again. This keeps the runtime guard
    exact for expressions like nested all() over constant lists while making them cheap to reject.
    """

    def __init__(self, runner: Runner, unit: Unit, iter_vars: tuple[str, ...]) -> None:
        self.runner = runner
        self.unit = unit
        self.fixed = not (unit.uses & set(iter_vars))
        self.outcome: tuple[Any, int] | None = None

    def run(self, params: dict[str, Any]) -> Any:
        """The value, or the UnitError, of one iteration."""
        frame = current_frame()
        if self.outcome is not None:
            frame.charge(self.outcome[1])
            return self.outcome[0]
        before = frame.cost
        try:
            value: Any = self.runner.run_unit(self.unit, params)
        except UnitError as exc:
            value = exc
        if self.fixed:
            self.outcome = (value, frame.cost - before)
        return value


def _insert(mapping: dict[Any, Any], entries: Mapping[Any, Any]) -> dict[Any, Any]:
    from policies.cel.runtime import map_insert

    try:
        return map_insert(mapping, entries)
    except CELEvalError as exc:
        raise UnitError(str(exc)) from None


def _iteration_rows(target: Any, nvars: int) -> list[tuple[Any, ...]]:
    if isinstance(target, list | tuple):
        return [(i, v) for i, v in enumerate(target)] if nvars == 2 else [(v,) for v in target]
    if isinstance(target, Mapping):
        return [(k, v) for k, v in target.items()] if nvars == 2 else [(k,) for k in target]
    raise UnitError(f"got '{go_type_name(target)}', expected iterable type")


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes | list | tuple | Mapping) else 1


def _runtime_site(args: tuple[Any, ...]) -> CallSite:
    """The estimator's view of a call with these actual arguments (exact sizes)."""
    sizes = tuple((_size(a), _size(a)) for a in args)
    elem: tuple[int, int] | None = None
    text = False
    if args and isinstance(args[0], list | tuple):
        longest = max((_size(x) for x in args[0]), default=0)
        elem = (0, longest)
        text = any(isinstance(x, str | bytes) for x in args[0])
    return CallSite(sizes, elem, text, args)
