"""Compiling selectors once and evaluating them against device bindings.

``compile_expression`` runs draguard's front end (parser, type checker and validators, cost
estimator) and caches the result by (expression, environment), like upstream's ``cel.Cache``. The
engine programs are lowered lazily, per engine, on first evaluation.

``Program.matches`` memoises results by *projection*: the values of exactly the device paths the
expression reads (plus the conversion error every evaluation on a broken device reports). A CEL
expression is a pure function of its inputs, so two devices that agree on those values get the
same answer; across a cluster of identical GPUs most evaluations become one dictionary lookup.
"""

from __future__ import annotations

import datetime
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from policies.api.quantity import Quantity
from policies.cel.binding import ABSENT, DeviceBinding, converts, entry
from policies.cel.checker import Checked, check
from policies.cel.cost import Estimate, estimate
from policies.cel.engines import COST_LIMIT, ENGINES, MISSING, Runner, UnitError, input_value
from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.errors import CompileError, EvalError
from policies.cel.library import Semver, cel_type_name
from policies.cel.lower import Input, Plan, lower
from policies.cel.parser import check_depth, parse
from policies.cel.stats import COMPILE, RESULTS

if TYPE_CHECKING:
    from policies.api.resource import Device

# CELSelectorExpressionMaxLength (resource/v1/types.go). Checked before parsing: besides being
# the API limit, very large inputs would crash the Rust engine's parser.
MAX_EXPRESSION_LENGTH = 10 * 1024
# CELSelectorExpressionMaxCost (resource/v1/types.go): the estimate limit for new selectors and
# the runtime limit for every evaluation.
MAX_COST = COST_LIMIT
# Results memoised per program, by projection; cleared when full (bounded memory).
MEMO_SIZE = 65_536

_MISSING_KEY = ("\x00missing",)


def _memo_key(value: Any) -> Any:
    """A hashable key that tells apart every value CEL can tell apart (True vs 1, 1 vs 1.0,
    1536Mi vs 1.5Gi, 1.0.0+a vs 1.0.0+b through its string)."""
    kind = type(value)
    if kind is str:
        return value
    if kind in (bool, int, float):
        return (kind, value)
    if kind is list:
        return (list, tuple(_memo_key(v) for v in value))
    if kind is dict:
        return (dict, tuple((k, _memo_key(v)) for k, v in value.items()))
    if isinstance(value, Quantity):
        return (Quantity, value.__reduce__()[1])
    if isinstance(value, Semver):
        return (Semver, str(value))
    return (kind, repr(value))


class Program:
    """A compiled selector. ``estimated_cost`` is the worst-case cost (cel-go's estimator)."""

    def __init__(self, expression: str, env: Environment, checked: Checked, cost: Estimate) -> None:
        self.expression = expression
        self.env = env
        self.checked = checked
        self.cost = cost
        self.estimated_cost = cost.max
        # Estimates over the limit mean evaluations must account for cost as they go.
        self.guarded = cost.max > MAX_COST
        self._memo: dict[tuple[Any, ...], bool | str] = {}

    def __repr__(self) -> str:
        return f"Program({self.expression!r}, cost={self.estimated_cost})"

    @cached_property
    def plan(self) -> Plan:
        return lower(self.checked, self.cost, ENGINES[self.env.engine]().caps, MAX_COST)

    @cached_property
    def device_inputs(self) -> tuple[Input, ...]:
        """The inputs read from the device (constants are the same for every device)."""
        return tuple(inp for inp in self.plan.inputs.values() if inp.kind != "const")

    @cached_property
    def runner(self) -> Runner:
        return Runner(self.plan, ENGINES[self.env.engine]())

    def names_read(self) -> tuple[tuple[str, str, str], ...]:
        """The attribute and capacity names the expression reads by constant path, as
        ``(kind, domain, id)`` with kind ``attribute`` or ``capacity``: every
        ``device.attributes["d"].id`` (also ``.?id``, ``["id"]``, ``has(...)``, ``"id" in ...`` and
        through ``cel.bind``). Names computed at run time are not listed."""
        names = {
            ("attribute" if inp.section == "attributes" else "capacity", inp.domain, inp.ident)
            for inp in self.plan.inputs.values()
            if inp.kind in ("value", "has")
        }
        return tuple(sorted(names))

    def projection(self, device: DeviceBinding) -> tuple[Any, ...]:
        """The values of the device paths this program reads, as a memo key."""
        out = []
        for inp in self.device_inputs:
            value = input_value(inp, device)
            out.append(_MISSING_KEY if value is MISSING else _memo_key(value))
        return tuple(out)

    @cached_property
    def _reads_entries(self) -> bool:
        """Whether the program reads the device only through single values, their presence, the
        driver and allowMultipleAllocations (not whole maps): then its projection can be read off
        a device without binding it."""
        return all(inp.kind in ("driver", "multi", "value", "has") for inp in self.device_inputs)

    def known_result(self, driver: str, device: Device) -> bool | None:
        """The memoised result for a device of ``driver``, found without binding the device (its
        projection read off the model): None when not memoised yet, when the program reads whole
        maps or when an attribute of the device does not convert (a binding decides then). Counting
        a whole cluster's devices for a class costs a lookup per device this way."""
        list_types = self.env.list_type_attributes
        if not self._reads_entries or not converts(device, list_types):
            return None
        key = []
        for inp in self.device_inputs:
            if inp.kind == "driver":
                value: Any = driver
            elif inp.kind == "multi":
                value = bool(device.allow_multiple_allocations)
            else:
                value = entry(driver, device, inp.section, inp.domain, inp.ident, list_types)
                value = value is not ABSENT if inp.kind == "has" else value
            key.append(_MISSING_KEY if value is ABSENT else _memo_key(value))
        found = self._memo.get(tuple(key))
        if not isinstance(found, bool):
            return None
        RESULTS.hits += 1
        return found

    def matches(self, device: DeviceBinding) -> bool:
        """True if the selector accepts the device; EvalError (naming the device) otherwise."""
        if device.error:
            raise EvalError(device.error, device.device_id)
        key = self.projection(device)
        found = self._memo.get(key)
        if found is None:
            RESULTS.misses += 1
            found = self._evaluate(device)
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = found
        else:
            RESULTS.hits += 1
        if isinstance(found, str):
            raise EvalError(found, device.device_id)
        return found

    def evaluate(self, device: DeviceBinding) -> Any:
        """The raw result value (no memo, no bool conversion); raises EvalError."""
        if device.error:
            raise EvalError(device.error, device.device_id)
        try:
            return self.runner.evaluate(device)
        except UnitError as exc:
            raise EvalError(exc.message, device.device_id) from None

    def _evaluate(self, device: DeviceBinding) -> bool | str:
        try:
            value = self.runner.evaluate(device)
        except UnitError as exc:
            return exc.message
        if isinstance(value, bool):
            return value
        return f"CEL result of type {self._result_type(value, device)} could not be converted to bool"

    def _result_type(self, value: Any, device: DeviceBinding) -> str:
        """The cel-go type name of a non-bool result (``compile.go``'s ``result.Type().TypeName()``).

        An engine without ``typed_values`` hands a uint back as an int and a type value as its
        name; for those two the engine is asked what ``type()`` of the result is."""
        name = _type_name(value)
        if self.runner.engine.caps.typed_values or name not in _UNTYPED:
            return name
        probe = compile_expression(f"type(dyn({self.expression})) == {_UNTYPED[name]}", self.env)
        try:
            return _UNTYPED[name] if probe.matches(device) else name
        except EvalError:
            return name


# What an int or a string result may really be on an engine without typed values.
_UNTYPED = {"int": "uint", "string": "type"}


def _type_name(value: Any) -> str:
    if isinstance(value, datetime.datetime | datetime.timedelta):
        return "google.protobuf." + ("Timestamp" if isinstance(value, datetime.datetime) else "Duration")
    return cel_type_name(value)


_CACHE: OrderedDict[tuple[str, Environment], Program] = OrderedDict()
_CACHE_SIZE = 4096
# Also bounded by the expressions' total length: a compiled program takes about 60 bytes of memory
# per character of source (0.6 MB for 10 KiB), so 4,096 long selectors (a few hostile claims'
# worth) would hold 2.4 GB. It is also about 0.4 objects per character, which every full garbage
# collection walks with the GIL held: with 1 MiB of source cached, the webhook stopped for 300-430
# ms at each (issue 16). 256 KiB hold 2,500 selectors of 100 characters, about 15 MB and 95,000
# objects when they are long ones: 25-30 ms a full collection (measured).
_CACHE_CHARS = 1 << 18
_cached_chars = 0
_CACHE_LOCK = threading.Lock()  # the webhook may compile from several threads


def front_end(expression: str, env: Environment) -> tuple[Checked, Estimate]:
    """Parse, check and cost ``expression``: the part of compiling that takes time (about 4 ms per
    KiB of source), as a pure function of its arguments, so that a caller may run it elsewhere
    (the webhook runs long ones in a worker process: ``webhook.celworker``). Raises CompileError."""
    try:
        root = parse(expression)
        check_depth(expression, root)
    except CompileError as exc:  # upstream reports parse issues like check issues
        raise CompileError(f"compilation failed: {exc.message}", exc.column, exc.line) from None
    checked = check(root, expression, env)
    return checked, estimate(checked)


FrontEnd = Callable[[str, Environment], tuple[Checked, Estimate]]


def compile_expression(
    expression: str, env: Environment = DEFAULT_ENVIRONMENT, run: FrontEnd = front_end
) -> Program:
    """Compile (or fetch from the LRU cache) a selector in ``env``; raises CompileError.

    ``run`` runs :func:`front_end` on a cache miss: in this thread, or wherever the caller chooses."""
    key = (expression, env)
    with _CACHE_LOCK:
        program = _CACHE.get(key)
        if program is not None:
            COMPILE.hits += 1
            _CACHE.move_to_end(key)
            return program
        COMPILE.misses += 1
    size = len(expression.encode())
    if size > MAX_EXPRESSION_LENGTH:
        # Worded like the API server's field.TooLong for the expression (resource validation).
        raise CompileError(f"Too long: may not be more than {MAX_EXPRESSION_LENGTH} bytes (got {size})")
    program = Program(expression, env, *run(expression, env))
    global _cached_chars
    with _CACHE_LOCK:
        if key not in _CACHE:  # another thread may have compiled it meanwhile
            _cached_chars += len(expression)
        _CACHE[key] = program
        while len(_CACHE) > _CACHE_SIZE or _cached_chars > _CACHE_CHARS:
            (evicted, _), _ = _CACHE.popitem(last=False)
            _cached_chars -= len(evicted)
    return program
