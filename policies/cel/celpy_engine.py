"""The cel-python (``celpy``) engine for lowered plans, selectable in the config instead of the Rust one.

It is imported only when a configuration selects it (see ``engines.ENGINES``): cel-python costs
16 MB and a third of a second to import. What it can and cannot do natively is its ``caps``; the
lowering (policies.cel.lower) fills in the rest, as for the Rust engine.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError as CelpyError

from policies.cel.engines import (
    COST_EXCEEDED,
    TOKEN_RE,
    CostExceeded,
    Engine,
    Frame,
    UnitError,
    current_frame,
)
from policies.cel.library import CELEvalError, UInt
from policies.cel.lower import Capabilities
from policies.cel.parser import MAX_RECURSION_DEPTH, stack_headroom

logging.getLogger("celpy").setLevel(logging.ERROR)


class CelpyEngine(Engine):
    name = "celpy"
    caps = Capabilities(
        "celpy",
        optional_values=False,
        cross_numeric=False,
        presence_errors=False,
        max_nesting=10,  # its tree-walking evaluator recurses deeply per level
        typed_values=True,
        conversions=frozenset(
            {
                "int64_to_int64",
                "double_to_double",
                "string_to_string",
                "bytes_to_bytes",
                "string_to_bytes",
            }
        ),
    )

    def __init__(self) -> None:
        self.env = celpy.Environment()

    def compile(self, source: str, functions: dict[str, Callable[..., Any]]) -> Any:
        return self.env.program(self.env.compile(source), functions=functions)

    def run(self, compiled: Any, variables: dict[str, Any]) -> Any:
        try:
            with stack_headroom(40 * MAX_RECURSION_DEPTH):
                result = compiled.evaluate(variables)
        except CelpyError as exc:
            raise UnitError(self.error_text(exc)) from None
        except CostExceeded:
            raise
        except Exception as exc:
            raise UnitError(self.error_text(exc)) from None
        if isinstance(result, CelpyError):
            raise UnitError(self.error_text(result))
        return result

    def error_text(self, exc: BaseException) -> str:
        text = str(exc.args[0]) if exc.args else str(exc)
        token = TOKEN_RE.search(text)
        if token is not None:
            return current_frame().errors[int(token.group(1))]
        undefined = re.search(r"undeclared reference to '([^']+)'", text)
        if undefined is not None:
            return f"\x00undefined {undefined.group(1)}"
        member = re.search(r"no such member in mapping: '?([^']*)'?", text)
        if member is not None:
            return f"no such key: {member.group(1)}"
        detail = exc.args[2] if len(exc.args) > 2 and isinstance(exc.args[2], tuple) else ()
        if text == "no such key" and detail:
            return f"no such key: {detail[0]}"
        if len(exc.args) > 1 and exc.args[1] is IndexError:
            return "index out of bounds"
        if "overflow" in text:
            return "integer overflow"
        if "zero" in text:
            modulo = any("modulo" in str(d) and "division" not in str(d) for d in detail)
            return "modulus by zero" if modulo else "division by zero"
        if "no matching overload" in text or "no such overload" in text:
            return "no such overload"
        return text

    def encode(self, value: Any, frame: Frame) -> Any:
        if isinstance(value, bool):
            return celtypes.BoolType(value)
        if isinstance(value, UInt):
            return celtypes.UintType(int(value))
        if isinstance(value, int):
            return celtypes.IntType(value)
        if isinstance(value, float):
            return celtypes.DoubleType(value)
        if isinstance(value, str):
            return celtypes.StringType(value)
        if isinstance(value, bytes):
            return celtypes.BytesType(value)
        if isinstance(value, list | tuple):
            return celtypes.ListType([self.encode(v, frame) for v in value])
        if isinstance(value, Mapping):
            return celtypes.MapType({self.encode(k, frame): self.encode(v, frame) for k, v in value.items()})
        if isinstance(value, datetime.datetime):
            return celtypes.TimestampType(value)
        if isinstance(value, datetime.timedelta):
            return celtypes.DurationType(value)
        return value

    def decode(self, value: Any, frame: Frame) -> Any:
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        if isinstance(value, celtypes.UintType):
            return UInt(int(value))
        if isinstance(value, celtypes.IntType):
            return int(value)
        if isinstance(value, celtypes.DoubleType):
            return float(value)
        if isinstance(value, celtypes.StringType):
            return str(value)
        if isinstance(value, celtypes.BytesType):
            return bytes(value)
        if isinstance(value, list):  # a ListType, or the plain list cel-python's "+" builds
            return [self.decode(v, frame) for v in value]
        if isinstance(value, celtypes.MapType):
            return {self.decode(k, frame): self.decode(v, frame) for k, v in value.items()}
        if isinstance(value, celtypes.TimestampType):
            return datetime.datetime.fromtimestamp(value.timestamp(), datetime.UTC)
        if isinstance(value, celtypes.DurationType):
            return datetime.timedelta(seconds=value.total_seconds())
        return value

    def callable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def call(*args: Any) -> Any:
            frame = current_frame()
            for a in args:
                if isinstance(a, CelpyError):
                    return a
            try:
                return engine.encode(fn(*(engine.decode(a, frame) for a in args)), frame)
            except CostExceeded:
                return CelpyError(frame.token(COST_EXCEEDED))
            except UnitError as exc:
                return CelpyError(frame.token(exc.message))
            except CELEvalError as exc:
                return CelpyError(frame.token(str(exc)))
            except (TypeError, ValueError, AttributeError, KeyError, IndexError):
                return CelpyError(frame.token("no such overload"))

        return call
