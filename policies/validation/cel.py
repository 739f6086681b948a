"""Selector expressions: the length limit, compilation and the cost limit.

Upstream ``validateCELSelector`` (``pkg/apis/resource/validation/validation.go``): an expression
longer than 10 Ki is rejected without compiling it; otherwise it must compile and its estimated
cost must stay within 1,000,000. A compile error is "Invalid value" showing the expression with
cel-go's message; an expensive one is "Forbidden". New expressions compile in the environment the
API server uses for new writes (features as in a default 1.36 API server: DRAConsumableCapacity
on, DRAListTypeAttributes off); expressions that were already stored (an update that leaves the
selectors unchanged) are still checked, but in the permissive "stored expressions" environment,
which declares every field and function whatever the feature gates say.
"""

from __future__ import annotations

from policies.cel import CompileError, Environment, compile_expression
from policies.validation.fielderrors import ErrorList, Path, forbidden, invalid, too_long

CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000

NEW_EXPRESSIONS = Environment(kind="new", list_type_attributes=False, consumable_capacity=True)
STORED_EXPRESSIONS = Environment(kind="stored", list_type_attributes=False, consumable_capacity=True)


def validate_cel_expression(expression: str, path: Path, stored: bool = False) -> ErrorList:
    if len(expression.encode()) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        return [too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)]
    try:
        program = compile_expression(expression, STORED_EXPRESSIONS if stored else NEW_EXPRESSIONS)
    except CompileError as err:
        return [invalid(path, expression, err.message)]
    if program.estimated_cost > CEL_SELECTOR_EXPRESSION_MAX_COST:
        return [forbidden(path, "too complex, exceeds cost limit")]
    return []
