"""Device taints and tolerations, as the allocator (and the taint eviction controller) read them.

Upstream: ``resourceclaim.ToleratesTaint`` (``k8s.io/dynamic-resource-allocation/resourceclaim/
devicetoleration.go``), ``taintPreventsAllocation`` in the incubating allocator, and the scheduler's
DeviceTaintRule overlay (a rule's taint is added to every device its selector matches).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from policies.api.resource import Device, DeviceTaint, DeviceTaintRule, DeviceToleration

# Effects that keep a device from being allocated; None and unknown effects are ignored.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class Tolerating(Protocol):
    """A toleration: a device request's, or a pod's (the same matching, core/v1 and resource/v1)."""

    @property
    def key(self) -> str | None: ...
    @property
    def operator(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str | None: ...


class Tainting(Protocol):
    """A taint: a device's, or a node's."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str: ...


def tolerates(toleration: Tolerating, taint: Tainting) -> bool:
    """Whether one toleration covers one taint (empty effect or key match all; Exists ignores value).
    Devices and nodes match alike (upstream resourceclaim and core/v1 ``ToleratesTaint``)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in (None, "", "Equal"):
        return (toleration.value or "") == (taint.value or "")
    return toleration.operator == "Exists"


def blocks_allocation(taints: Iterable[DeviceTaint], tolerations: Sequence[DeviceToleration]) -> bool:
    """Whether a NoSchedule or NoExecute taint is not tolerated (upstream taintPreventsAllocation)."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return True
    return False


def rule_selects(rule: DeviceTaintRule, driver: str, pool: str, device: str) -> bool:
    """A rule's device selector: absent selects nothing, empty selects everything."""
    selector = rule.spec.device_selector
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == driver)
        and (selector.pool is None or selector.pool == pool)
        and (selector.device is None or selector.device == device)
    )


def device_taints(
    device: Device, driver: str, pool: str, taint_rules: Sequence[DeviceTaintRule]
) -> tuple[DeviceTaint, ...]:
    """The device's own taints followed by those of every DeviceTaintRule that selects it."""
    own = tuple(device.taints) if device.taints else ()
    return own + tuple(r.spec.taint for r in taint_rules if rule_selects(r, driver, pool, device.name))
