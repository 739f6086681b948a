"""API-server validation of the resource.k8s.io kinds (Kubernetes 1.36): shared pieces, DeviceClass,
DeviceTaintRule.

Mirrors ``pkg/apis/resource/validation/validation.go`` plus the declarative tags of
``staging/src/k8s.io/api/resource/v1/types.go``: the same checks, in the same order, with the same
messages and field paths, so a manifest that draguard rejects is rejected by the API server with
the same words, and the other way round. Objects arrive already defaulted (see
:func:`policies.validation.validate`), as they do in the API server. Claims are checked in
:mod:`policies.validation.claims`, slices in :mod:`policies.validation.slices`.

"Stored" means the value is unchanged from the object already in the cluster: upstream does not
re-check such CEL expressions and opaque parameters (their limits may have been tightened since
they were written), and neither does draguard.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from policies.api import resource as r
from policies.api.base import ApiModel
from policies.validation.cel import validate_cel_expression
from policies.validation.core import validate_conditions
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    duplicate,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)
from policies.validation.lists import validate_slice
from policies.validation.meta import IMMUTABLE
from policies.validation.names import (
    is_extended_resource_name,
    validate_dns_label,
    validate_driver_name,
    validate_label_name,
    validate_label_value,
    validate_pool_name,
)

# Limits: resource/v1 types.go constants (dra-reference section 2).
TAINT_RULE_MAX_CONDITIONS = 8
DEVICE_SELECTORS_MAX = 32
DEVICE_CONFIG_MAX = 32
DEVICE_TOLERATIONS_MAX = 16
BINDING_CONDITIONS_MAX = 4
BINDING_FAILURE_CONDITIONS_MAX = 4
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024

_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as sets.List prints them


def same_value(a: object, b: object) -> bool:
    """Semantic equality of two model values (what upstream's DeepEqual answers)."""
    return plain(a) == plain(b)


def plain(value: object) -> object:
    """A model value as JSON data: what is compared for "unchanged" and shown for immutable fields."""
    if isinstance(value, ApiModel):
        return value.to_json()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def immutable(new: object, old: object, path: Path, shown: Callable[[], object] | None = None) -> ErrorList:
    """``ValidateImmutableField``: report the new value when it differs from the old one.

    ``shown`` renders the value as Go prints it (:mod:`policies.validation.gosyntax`); without it a
    composite value falls back to its JSON form.
    """
    if same_value(new, old):
        return []
    return [invalid(path, shown() if shown is not None else plain(new), IMMUTABLE)]


def validate_selectors(selectors: list[r.DeviceSelector] | None, path: Path, stored: bool) -> ErrorList:
    return validate_slice(
        selectors, DEVICE_SELECTORS_MAX, lambda s, p: _validate_selector(s, p, stored), path
    )


def _validate_selector(selector: r.DeviceSelector, path: Path, stored: bool) -> ErrorList:
    if selector.cel is None:
        return [required(path.child("cel"))]
    # An unchanged (stored) selector is checked too, in the permissive environment (validation.go
    # validateCELSelector): a too-long, unparsable or too costly one is still an error.
    return validate_cel_expression(selector.cel.expression, path.child("cel", "expression"), stored)


def validate_configuration(config: r.DeviceConfiguration, path: Path, stored: bool) -> ErrorList:
    if config.opaque is None:
        return [required(path.child("opaque"))]
    opaque = config.opaque
    errs = validate_driver_name(opaque.driver, path.child("opaque", "driver"))
    errs += validate_raw_json_object(
        opaque.parameters, path.child("opaque", "parameters"), stored, OPAQUE_PARAMETERS_MAX_LENGTH
    )
    return errs


# encoding/json escapes these even inside strings (HTML safety, JavaScript line separators).
_GO_JSON_ESCAPED = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json_float(value: float) -> str:
    """encoding/json's float64: shortest digits, fixed notation in [1e-6, 1e21), else e-notation
    with the exponent's leading zero dropped (1e-07 is written 1e-7)."""
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        text = format(Decimal(repr(value)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = repr(value).partition("e")
    sign, digits = exponent[0], exponent[1:].lstrip("0")
    return f"{mantissa.removesuffix('.0')}e{sign}{digits.zfill(2) if sign == '+' else digits}"


def go_json(value: Any) -> str:
    """``value`` encoded as kubectl's Go encoder writes it (compact, sorted keys, HTML-escaped)."""
    if isinstance(value, dict):
        items = (f"{go_json(str(k))}:{go_json(v)}" for k, v in sorted(value.items()))
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, float) and math.isfinite(value):
        return _go_json_float(value)
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        text = "".join(_GO_JSON_ESCAPED.get(ch, ch) for ch in text)
    return text


def validate_raw_json_object(value: Any, path: Path, stored: bool, max_length: int) -> ErrorList:
    """A ``runtime.RawExtension`` that must hold a JSON object of at most ``max_length`` bytes.

    The size is that of the raw JSON the API server received, which kubectl writes with Go's
    encoder (:func:`go_json`); stored values are exempt from the limit (it was introduced in 1.32
    and existing objects keep working).
    """
    if value is None:
        return [required(path)]
    raw = go_json(value).encode("utf-8", "surrogatepass")
    if not stored and len(raw) > max_length:
        return [too_long(path, max_length)]
    if not isinstance(value, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


def validate_toleration(toleration: r.DeviceToleration, path: Path) -> ErrorList:
    errs: ErrorList = []
    if toleration.key:
        errs += validate_label_name(toleration.key, path.child("key"))
    operator = toleration.operator or ""
    value = toleration.value or ""
    if operator == "Exists":
        if value:
            errs.append(invalid(path.child("value"), value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errs += validate_label_value(value, path.child("value"))
    elif not operator:
        errs.append(required(path.child("operator")))
    else:
        errs.append(not_supported(path.child("operator"), operator, _TOLERATION_OPERATORS))
    if toleration.effect and toleration.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(path.child("effect"), toleration.effect, _TAINT_EFFECTS))
    return errs


def validate_tolerations(tolerations: list[r.DeviceToleration] | None, path: Path) -> ErrorList:
    # DeviceTolerationsMaxLength: 16 per request or result in 1.36 (dra-reference section 2).
    if tolerations is not None and len(tolerations) > DEVICE_TOLERATIONS_MAX:
        return [too_many(path, len(tolerations), DEVICE_TOLERATIONS_MAX)]
    errs: ErrorList = []
    for i, toleration in enumerate(tolerations or []):
        errs += validate_toleration(toleration, path.index(i))
    return errs


def validate_taint(taint: r.DeviceTaint, old: r.DeviceTaint | None, path: Path) -> ErrorList:
    """An unchanged effect is not re-checked, so effects added by a newer release keep working."""
    errs = validate_label_name(taint.key, path.child("key"))
    if taint.value:
        errs += validate_label_value(taint.value, path.child("value"))
    if old is None or old.effect != taint.effect:
        if not taint.effect:
            errs.append(required(path.child("effect")))
        elif taint.effect not in _TAINT_EFFECTS:
            errs.append(not_supported(path.child("effect"), taint.effect, _TAINT_EFFECTS))
    return errs


def validate_binding_conditions(
    conditions: list[str] | None, failures: list[str] | None, path: Path
) -> ErrorList:
    """At most 4 of each, condition-type syntax, no repeats, no overlap between the two lists.

    (1.37 adds "each list requires the other"; 1.36 does not check that.)
    """
    conditions, failures = conditions or [], failures or []
    errs = validate_slice(
        conditions, BINDING_CONDITIONS_MAX, validate_label_name, path.child("bindingConditions")
    )
    errs += validate_slice(
        failures, BINDING_FAILURE_CONDITIONS_MAX, validate_label_name, path.child("bindingFailureConditions")
    )
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        if cond in seen:
            errs.append(duplicate(path.child("bindingConditions").index(i), cond))
        seen.add(cond)
    seen_failures: set[str] = set()
    for i, cond in enumerate(failures):
        item = path.child("bindingFailureConditions").index(i)
        if cond in seen_failures:
            errs.append(duplicate(item, cond))
        seen_failures.add(cond)
        if cond in seen:
            errs.append(
                invalid(item, cond, "bindingFailureConditions must not overlap with bindingConditions")
            )
    return errs


def validate_class_spec(spec: r.DeviceClassSpec, old: r.DeviceClassSpec | None, path: Path) -> ErrorList:
    """Selectors and config are "stored" only when the whole list is unchanged (even reordering counts)."""
    selectors_stored = old is not None and same_value(spec.selectors, old.selectors)
    errs = validate_selectors(spec.selectors, path.child("selectors"), selectors_stored)
    config_stored = old is not None and same_value(spec.config, old.config)
    errs += validate_slice(
        spec.config,
        DEVICE_CONFIG_MAX,
        lambda c, p: validate_configuration(c, p, config_stored),
        path.child("config"),
    )
    name = spec.extended_resource_name
    if name is not None and not is_extended_resource_name(name):
        errs.append(
            invalid(path.child("extendedResourceName"), name, "must be a valid extended resource name")
        )
    return errs


def validate_taint_rule_spec(
    spec: r.DeviceTaintRuleSpec, old: r.DeviceTaintRuleSpec | None, path: Path
) -> ErrorList:
    errs: ErrorList = []
    selector = spec.device_selector
    spath = path.child("deviceSelector")
    if selector is not None:
        if selector.driver is not None:
            errs += validate_driver_name(selector.driver, spath.child("driver"))
        if selector.pool is not None:
            errs += validate_pool_name(selector.pool, spath.child("pool"))
        if selector.device is not None:
            errs += validate_dns_label(selector.device, spath.child("device"))
    errs += validate_taint(spec.taint, old.taint if old is not None else None, path.child("taint"))
    return errs


def validate_taint_rule_status(status: r.DeviceTaintRuleStatus | None, path: Path) -> ErrorList:
    conditions = status.conditions if status is not None else None
    errs = validate_conditions(conditions, path.child("conditions"))
    if conditions is not None and len(conditions) > TAINT_RULE_MAX_CONDITIONS:
        errs.append(too_many(path.child("conditions"), len(conditions), TAINT_RULE_MAX_CONDITIONS))
    return errs
