"""Compiling selectors once and evaluating them against device bindings."""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from typing import Any

import cel as rust_cel

from policies.cel.binding import DeviceBinding
from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.errors import CompileError, EvalError

# CELSelectorExpressionMaxLength (resource/v1/types.go); the Rust parser also crashes the process
# on very deep input, so the limit is enforced before any parsing.
MAX_EXPRESSION_LENGTH = 10 * 1024
# CELSelectorExpressionMaxCost (resource/v1/types.go).
MAX_COST = 1_000_000

# The Rust engine logs every failing Python callback at WARNING; a failing callback is an ordinary
# CEL runtime error here, reported through EvalError.
logging.getLogger("cel").disabled = True

_POSITION = re.compile(r"<input>:(\d+):(\d+)")


class Program:
    """A compiled selector: evaluate it with ``matches(binding)``."""

    def __init__(self, expression: str, env: Environment, compiled: Any, estimated_cost: int) -> None:
        self.expression = expression
        self.env = env
        self.estimated_cost = estimated_cost
        self._compiled = compiled

    def matches(self, device: DeviceBinding) -> bool:
        """True if the selector accepts the device; EvalError names the device on failure."""
        if device.error:
            raise EvalError(device.error, device.device_id)
        variables = {
            "device": {
                "driver": device.driver,
                "attributes": device.attributes,
                "capacity": device.capacity,
                "allowMultipleAllocations": device.allow_multiple_allocations,
            }
        }
        try:
            result = self._compiled.execute(variables)
        except Exception as exc:
            raise EvalError(str(exc), device.device_id) from None
        if not isinstance(result, bool):
            raise EvalError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return result


_CACHE: OrderedDict[tuple[str, Environment], Program] = OrderedDict()
_CACHE_SIZE = 4096


def compile_expression(expression: str, env: Environment = DEFAULT_ENVIRONMENT) -> Program:
    """Compile (or fetch from the LRU cache) a selector in ``env``; raises CompileError."""
    key = (expression, env)
    program = _CACHE.get(key)
    if program is not None:
        _CACHE.move_to_end(key)
        return program
    if len(expression.encode()) > MAX_EXPRESSION_LENGTH:
        raise CompileError(f"expression too long: must have at most {MAX_EXPRESSION_LENGTH} bytes")
    try:
        compiled = rust_cel.compile(expression)
    except ValueError as exc:
        found = _POSITION.search(str(exc))
        column = int(found.group(2)) if found else None
        raise CompileError(f"compilation failed: {exc}", column) from None
    program = Program(expression, env, compiled, 0)
    _CACHE[key] = program
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return program
