"""The allocator's feature switches (upstream ``structured.Features``).

Upstream: ``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/types.go``. The
defaults are what kube-scheduler 1.36 passes with its default feature gates: everything on except
list-type attributes (alpha in 1.36). ``device_binding_and_status`` stands for both
DRADeviceBindingConditions and DRAResourceClaimDeviceStatus, as in the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# camelCase switch name (as written in test data and on the command line) -> dataclass field.
_NAMES: dict[str, str] = {
    "adminAccess": "admin_access",
    "prioritizedList": "prioritized_list",
    "partitionableDevices": "partitionable_devices",
    "deviceTaints": "device_taints",
    "deviceBindingAndStatus": "device_binding_and_status",
    "consumableCapacity": "consumable_capacity",
    "listTypeAttributes": "list_type_attributes",
}


@dataclass(frozen=True)
class Features:
    """Which optional DRA behaviours the allocator applies."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    list_type_attributes: bool = False

    @classmethod
    def none(cls) -> Features:
        """All switches off: the upstream test table's default for a case."""
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def parse(cls, text: str) -> Features:
        """``"all"``, ``"none"`` or a comma-separated list of switch names (exactly those on).

        An empty string means none. Names are matched case-insensitively; unknown names are an
        error that lists the valid ones.
        """
        words = [w.strip() for w in text.split(",") if w.strip()]
        if words == ["all"]:
            return cls(**{f.name: True for f in fields(cls)})
        if words in ([], ["none"]):
            return cls.none()
        # Case-insensitive, so Go's field names (AdminAccess) work as well as the camelCase ones.
        by_lower = {name.lower(): attr for name, attr in _NAMES.items()}
        unknown = [w for w in words if w.lower() not in by_lower]
        if unknown:
            raise ValueError(
                f"unknown allocator feature(s) {', '.join(unknown)}: use 'all', 'none' or a comma-separated "
                f"list of {', '.join(_NAMES)}"
            )
        on = {by_lower[w.lower()] for w in words}
        return cls(**{f.name: f.name in on for f in fields(cls)})

    def names(self) -> list[str]:
        """The camelCase names of the switches that are on, in declaration order."""
        return [name for name, attr in _NAMES.items() if getattr(self, attr)]
