"""Program-level behaviour: limits, caching, the runtime cost guard, both engines."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time

import pytest

from policies.api.resource import Device
from policies.cel import (
    MAX_EXPRESSION_LENGTH,
    CompileError,
    Environment,
    EvalError,
    bind_device,
    compile_expression,
    decls,
)

DEVICE = bind_device("gpu.example.com", Device.model_validate({"name": "gpu-0"}), pool="p")
NESTED = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def test_compiled_programs_are_cached_per_environment() -> None:
    expr = 'device.driver == "gpu.example.com"'
    assert compile_expression(expr) is compile_expression(expr)
    assert compile_expression(expr) is not compile_expression(expr, Environment(kind="new"))


def test_expressions_over_the_size_limit_are_rejected_before_parsing() -> None:
    inside = "true || " * ((MAX_EXPRESSION_LENGTH - 4) // 8) + "true"
    assert len(inside) <= MAX_EXPRESSION_LENGTH
    compile_expression(inside)
    # The API server's wording for an over-long selector (field.TooLong in 1.36 apimachinery).
    with pytest.raises(CompileError, match="Too long: may not be more than 10240 bytes"):
        compile_expression(inside + " || true")
    with pytest.raises(CompileError, match="10240 bytes"):  # bytes, not characters
        compile_expression('"' + "é" * 5200 + '" == ""')


@pytest.mark.parametrize("engine", ["rust", "celpy"])
def test_cost_guard_stops_a_hostile_comprehension_quickly(engine: str) -> None:
    # Seven nested all() whose innermost body depends on every variable: nothing can be reused,
    # about 10^7 iterations in full; cel-go stops it with its 1,000,000 cost limit.
    names = ["a", "b", "c", "d", "e", "f", "g"]
    body = " + ".join(names) + " >= 0"
    expr = body
    for name in reversed(names):
        expr = f"{NESTED}.all({name}, {expr})"
    program = compile_expression(expr, Environment(engine=engine))  # type: ignore[arg-type]
    assert program.estimated_cost > 1_000_000
    if engine == "celpy":
        pytest.skip("cel-python runs one Python-level interpretation per iteration: correct but ~30 s")
    start = time.perf_counter()
    with pytest.raises(EvalError, match="actual cost limit exceeded"):
        program.matches(DEVICE)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("engine", ["rust", "celpy"])
def test_cost_guard_lets_expensive_estimates_run_when_actual_cost_is_low(engine: str) -> None:
    # Estimated over the limit (10^6 iterations at most) but exists() stops at the first element.
    expr = f"{NESTED}.exists(a, {NESTED}.exists(b, {NESTED}.exists(c, {NESTED}.exists(d, "
    expr += f"{NESTED}.exists(e, {NESTED}.exists(f, a + b + c + d + e + f == 0))))))"
    program = compile_expression(expr, Environment(engine=engine))  # type: ignore[arg-type]
    assert program.estimated_cost > 1_000_000
    assert program.matches(DEVICE) is True


def test_stored_and_new_environments_differ_only_where_gates_do() -> None:
    new = Environment(kind="new", consumable_capacity=False)
    with pytest.raises(CompileError, match="undefined field 'allowMultipleAllocations'"):
        compile_expression("device.allowMultipleAllocations", new)
    assert compile_expression("device.allowMultipleAllocations").matches(DEVICE) is False


def test_unbounded_estimates_are_charged_by_actual_sizes() -> None:
    # A dyn list element has no size bound, so the estimate is unbounded (as in cel-go); the
    # stored environment still evaluates it, charging the regex by the strings it really gets.
    lists = Environment(list_type_attributes=True)
    device = bind_device(
        "gpu.example.com",
        Device.model_validate({"name": "gpu-0", "attributes": {"names": {"strings": ["12", "23"]}}}),
        lists,
    )
    program = compile_expression(
        'device.attributes["gpu.example.com"].names.exists(n, n.matches("^23"))', lists
    )
    assert program.estimated_cost == 2**64 - 1
    assert program.matches(device) is True
    growing = compile_expression('lists.range(3000).map(i, "xx" + string(i)).size() == 3000', lists)
    assert growing.guarded and growing.matches(device) is True


@pytest.mark.parametrize("engine", ["rust", "celpy"])
def test_deepest_accepted_nesting_evaluates(engine: str) -> None:
    # cel-go accepts 249 nested brackets; the Rust parser stops near 100 and cel-python's
    # evaluator recurses deeply, so the lowering splits such expressions into several programs.
    env = Environment(engine=engine)  # type: ignore[arg-type]
    nested = "[" * 249 + "device.driver" + "]" * 249
    assert compile_expression(f"{nested} != []", env).matches(DEVICE) is True
    calls = "dyn(" * 120 + 'device.driver == "gpu.example.com"' + ")" * 120
    assert compile_expression(f"{calls} && true", env).matches(DEVICE) is True


def test_cel_python_is_imported_only_when_a_config_selects_it() -> None:
    """cel-python costs 16 MB and a third of a second to import: serve must not pay it by default."""
    code = "import sys, webhook.commands.serve, policies.cel; print('celpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_overload_survives_pickling_as_a_reference_to_the_registry() -> None:
    """The webhook's CEL worker process sends checked expressions back pickled
    (webhook/celworker.py); many overloads carry closures, so each goes as its id."""
    for includes in (False, True):
        for decl in decls.functions(includes).values():
            for overload in decl.overloads:
                assert pickle.loads(pickle.dumps(overload)) == overload
