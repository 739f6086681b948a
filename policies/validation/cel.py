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


def stored_selector_note(kind: str, expression: str) -> str:
    """What a selector that a create would refuse means for a ``kind`` object the cluster already
    holds with it. kube-scheduler compiles stored selectors in the stored-expressions environment
    (``k8s.io/apiserver/pkg/cel/environment``, ``StoredExpressions``), which declares every
    function and field whatever the feature gates, and checks no estimated cost; the API server
    never validates a claim's or a template's (immutable) spec again, and checks a class's
    unchanged selector in the stored environment, cost and length included (``validation.go``
    ``validateDeviceClassSpec``: an unchanged selector list is "stored")."""
    try:
        compile_expression(expression, STORED_EXPRESSIONS)
    except CompileError:
        return (
            f"an existing {kind} with this selector does not work either: kube-scheduler compiles stored "
            "selectors in the stored-expressions environment, and it does not compile there"
        )
    if kind == "DeviceClass" and validate_cel_expression(expression, Path(), stored=True):
        return (
            "an existing DeviceClass with this selector still selects devices (kube-scheduler compiles it "
            "in the stored-expressions environment), but the API server refuses every update of the "
            "class until the selector changes"
        )
    return (
        f"an existing {kind} with this selector keeps working: kube-scheduler compiles stored selectors "
        "in the stored-expressions environment, which has every function and field whatever the "
        "feature gates, and the API server lets it stay while it is unchanged"
    )


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
