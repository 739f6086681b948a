"""The DRA CEL environment: compile selectors once, bind devices once, evaluate like cel-go.

Public API (used by the allocator, validation and the webhook):

* ``Environment`` - stored (scheduler) or new (API validation) expressions, feature gates, engine;
* ``compile_expression(expression, env)`` -> ``Program`` (cached; raises ``CompileError``);
* ``bind_device(driver, device, env, pool=...)`` -> ``DeviceBinding`` (a view of the device, kept per device);
* ``Program.matches(binding)`` -> bool (raises ``EvalError`` naming the device);
* ``SelectorCache`` - results by (expression, device, slice generation) across allocations;
* ``selector_report(program, bindings)`` -> ``SelectorReport`` for the webhook.

``CELEvalError`` is the runtime error type of the library functions (policies.cel.library); it
never escapes an evaluation, which reports every failure as ``EvalError``.

How it works (details in each module): ``parser`` (cel-go's grammar and macros), ``checker``
(cel-go's type rules and the Kubernetes validators), ``cost`` (cel-go's estimator with the DRA
size bounds), ``lower`` (a plan of engine programs and Python helpers reproducing cel-go's
semantics), ``engines`` (the Rust engine and cel-python running a plan, and the runtime cost guard),
``program`` (compile cache, result memo), ``binding``, ``cache``, ``report``.
"""

from policies.cel.binding import DeviceBinding, bind_device
from policies.cel.cache import SelectorCache
from policies.cel.environment import Environment
from policies.cel.errors import CELError, CompileError, EvalError
from policies.cel.library import CELEvalError
from policies.cel.program import MAX_COST, MAX_EXPRESSION_LENGTH, Program, compile_expression
from policies.cel.report import SelectorReport, selector_report

__all__ = [
    "MAX_COST",
    "MAX_EXPRESSION_LENGTH",
    "CELError",
    "CELEvalError",
    "CompileError",
    "DeviceBinding",
    "Environment",
    "EvalError",
    "Program",
    "SelectorCache",
    "SelectorReport",
    "bind_device",
    "compile_expression",
    "selector_report",
]
