"""The cost estimator: upstream's figures (conformance.yaml) and never below what an evaluation
really costs, which is what lets unguarded programs skip runtime accounting."""

from __future__ import annotations

import pytest

from policies.api.resource import Device
from policies.cel import Environment, bind_device, compile_expression
from policies.cel.engines import Runner, RustEngine
from policies.cel.lower import lower

LISTS = Environment(list_type_attributes=True)
ATTRS = 'device.attributes["gpu.example.com"]'
WORST = bind_device(
    "gpu.example.com",
    Device.model_validate(
        {
            "name": "worst",
            "attributes": {
                # As large as validation allows: 48 values in total, strings of 64 characters.
                "names": {"strings": [f"{i:02d}" + "x" * 62 for i in range(24)]},
                "numbers": {"ints": list(range(23))},
                "text": {"string": "y" * 64},
            },
        }
    ),
    LISTS,
)


@pytest.mark.parametrize(
    "expression",
    [
        f'{ATTRS}.names.exists(n, n.startsWith("23"))',
        f"{ATTRS}.names.all(n, {ATTRS}.numbers.all(i, i < 100 && n.size() > i))",
        f"{ATTRS}.numbers.map(i, i * 2).filter(i, i > 10).size() > 3",
        f'{ATTRS}.names.exists_one(n, n.matches("^23"))',
        f"{ATTRS}.names.transformList(i, n, n.substring(0, 2)).size() == 24",
        f'{ATTRS}.exists(k, v, k == "text" && v.split("y").size() > 1)',
        f'cel.bind(t, {ATTRS}.text, lists.range(20).all(i, t.charAt(i) == "y"))',
    ],
)
def test_estimate_bounds_the_accounted_cost(expression: str) -> None:
    program = compile_expression(expression, LISTS)
    # Every comprehension accounted, with the estimate itself as the limit: exceeding it would
    # mean the estimate was too low.
    plan = lower(program.checked, program.cost, RustEngine.caps, limit=program.estimated_cost, guarded=True)
    value, cost = Runner(plan, RustEngine()).evaluate_with_cost(WORST)
    assert isinstance(value, bool)
    assert 0 < cost <= program.estimated_cost


def test_unbounded_sizes_make_the_estimate_exceed_the_limit() -> None:
    # Nothing bounds a computed list's size: cel-go estimates such comprehensions as unbounded.
    assert compile_expression("lists.range(3).map(i, [i]).flatten().all(x, x >= 0)").estimated_cost > 10**18
