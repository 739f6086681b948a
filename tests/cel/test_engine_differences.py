"""Where the raw engines differ from cel-go, and proof that draguard's lowering hides it.

Each row runs one expression three ways: on the bare Rust ``cel`` package, on bare ``celpy``,
and through ``policies.cel`` (which must give cel-go's answer on both engines). The raw results
are asserted too: if an engine release changes one, this file says which workaround may have
become unnecessary (or wrong). ``ERROR`` stands for "the engine raises"; ``SYNTAX`` for "the
engine cannot parse it".
"""

from __future__ import annotations

import logging
from typing import Any

import cel
import celpy
import pytest

from policies.api.resource import Device
from policies.cel import Environment, EvalError, bind_device, compile_expression

logging.getLogger("cel").disabled = True
ERROR, SYNTAX = "ERROR", "SYNTAX"

# (why, expression, raw Rust, raw celpy, cel-go)
ROWS: list[tuple[str, str, Any, Any, Any]] = [
    (
        "strings are sized in code points, the Rust engine counts UTF-8 bytes",
        'size("héllo") == 5',
        False,
        True,
        True,
    ),
    (
        "errors inside exists() are absorbed when another element decides; Rust stops at the first",
        "[1, 2].exists(x, x == 2 || 1 / 0 == 1)",
        ERROR,
        True,
        True,
    ),
    (
        "optional field selection is not supported by either engine's parser",
        '{"a": 1}.?a.orValue(0) == 1',
        SYNTAX,
        SYNTAX,
        True,
    ),
    ("cel.bind is a macro neither engine knows", "cel.bind(x, 2, x * x) == 4", ERROR, ERROR, True),
    (
        "two-variable comprehensions are unknown to both engines",
        "[5].all(i, v, i == 0 && v == 5)",
        ERROR,
        ERROR,
        True,
    ),
    (
        "negating the minimum int overflows in cel-go; the Rust engine wraps around",
        "-(-9223372036854775807 - 1) < 0",
        True,
        ERROR,
        ERROR,
    ),
    ("RE2 \\d is ASCII-only; the Rust regex crate's is Unicode", '"٣".matches("\\\\d")', True, False, False),
    ("string(double) is Go's %g formatting", 'string(1e6) == "1e+06"', False, False, True),
    ("map keys compare numerically across int and uint", 'dyn({1: "a"})[1u] == "a"', ERROR, ERROR, True),
    (
        "int and double compare numerically when dynamic; cel-python has no cross-type equality",
        "dyn(1) == 1.0",
        True,
        ERROR,
        True,
    ),
    ("cross-type ordering; cel-python rejects it", "1 < 2.5", True, ERROR, True),
    (
        "has() propagates the error of a failing operand; cel-python answers false",
        'has(dyn({"a": 1}).b.c)',
        ERROR,
        False,
        ERROR,
    ),
    ("bool(string) is missing from the Rust engine", 'bool("true")', ERROR, True, True),
]


def _raw_rust(expression: str) -> Any:
    try:
        program = cel.compile(expression)
    except ValueError:
        return SYNTAX
    try:
        return program.execute({})
    except Exception:
        return ERROR


def _raw_celpy(expression: str) -> Any:
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
    except Exception:
        return SYNTAX
    try:
        result = env.program(ast).evaluate({})
    except Exception:
        return ERROR
    return ERROR if isinstance(result, Exception) else bool(result)


def _lowered(expression: str, engine: str) -> Any:
    device = bind_device("d", Device.model_validate({"name": "x"}))
    try:
        program = compile_expression(expression, Environment(engine=engine))  # type: ignore[arg-type]
    except Exception:
        return SYNTAX
    try:
        return program.matches(device)
    except EvalError:
        return ERROR


@pytest.mark.parametrize(("why", "expression", "rust", "celpy_raw", "cel_go"), ROWS, ids=[r[1] for r in ROWS])
def test_engine_difference(why: str, expression: str, rust: Any, celpy_raw: Any, cel_go: Any) -> None:
    assert _raw_rust(expression) == rust, why
    assert _raw_celpy(expression) == celpy_raw, why
    assert _lowered(expression, "rust") == cel_go, why
    assert _lowered(expression, "celpy") == cel_go, why
