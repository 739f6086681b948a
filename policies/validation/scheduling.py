"""API-server validation of a scheduling.k8s.io/v1 PriorityClass (Kubernetes 1.36).

Upstream ``pkg/apis/scheduling/validation/validation.go`` (``ValidatePriorityClass``,
``ValidatePriorityClassUpdate``), with ``IsKnownSystemPriorityClass`` of
``pkg/apis/scheduling/v1/helpers.go`` and ``ValidatePreemptionPolicy`` of
``pkg/apis/core/validation/validation.go``: a name under the ``system-`` prefix must be one of the
system classes, exactly; any other class may not go above the highest user-definable value; the
preemption policy is one of two; an update may change neither the value nor the policy. The
object arrives defaulted (a missing policy is ``PreemptLowerPriority``). A second default class is
the admission plugin's refusal (:meth:`policies.priority.Priorities.class_refusal`).
"""

from __future__ import annotations

from policies.api.scheduling import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    SYSTEM_CLASSES,
    SYSTEM_PREFIX,
    PriorityClass,
)
from policies.validation.core import validate_preemption_policy
from policies.validation.fielderrors import ErrorList, Path, forbidden
from policies.validation.resource import immutable

VALUE = Path("value")
POLICY = Path("preemptionPolicy")


def _system_class_error(pc: PriorityClass) -> str | None:
    """upstream IsKnownSystemPriorityClass's error, or None when ``pc`` is a system class as is."""
    for system in SYSTEM_CLASSES:
        if system.name != pc.name:
            continue
        if system.value != pc.value:
            return f"value of {system.name} PriorityClass must be {system.value}"
        if bool(system.global_default) != bool(pc.global_default):
            wanted = "true" if system.global_default else "false"
            return f"globalDefault of {system.name} PriorityClass must be {wanted}"
        return None
    return f"{pc.name} is not a known system priority class"


def validate_priority_class(pc: PriorityClass) -> ErrorList:
    """``ValidatePriorityClass`` after the object meta (the caller's)."""
    errs: ErrorList = []
    if pc.name.startswith(SYSTEM_PREFIX):
        error = _system_class_error(pc)
        if error is not None:
            errs.append(
                forbidden(
                    Path("metadata", "name"),
                    f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. "
                    f"error: {error}",
                )
            )
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(
            forbidden(
                VALUE,
                f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    return errs + validate_preemption_policy(pc.preemption_policy, POLICY)


def validate_priority_class_update(pc: PriorityClass, old: PriorityClass) -> ErrorList:
    """``ValidatePriorityClassUpdate`` after the object meta (the caller's)."""
    errs: ErrorList = []
    if pc.value != old.value:
        errs.append(forbidden(VALUE, "may not be changed in an update."))
    return errs + immutable(pc.preemption_policy, old.preemption_policy, POLICY)
