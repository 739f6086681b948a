"""Kubernetes feature gates as the dry run sees them: the 1.36 defaults, changed by name.

``--features`` takes what kube-scheduler's ``--feature-gates`` takes (``DRAPartitionableDevices=false,
DRADeviceTaintRules=true``), applied on top of the 1.36 defaults (``kube-scheduler --help``, 1.36.2),
and still the older words: ``all``, ``none`` or a list of allocator switch names (``deviceTaints``),
which turn exactly those allocator switches on. Both may be mixed: the switch names first set the
allocator's gates, then ``Name=value`` entries change single gates.

One deliberate default differs from upstream: ``DRADeviceTaintRules`` is off in 1.36, but a
DeviceTaintRule exists only in a cluster that serves its API, which needs the gate; so the dry run
applies the rules it is given unless told ``DRADeviceTaintRules=false``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.allocator import Features

# The gates whose behaviour the dry run ports, with their 1.36 defaults. Locked GA gates
# (DRAAdminAccess, DRAPrioritizedList) are listed because the allocator still has their switch.
DEFAULTS: Mapping[str, bool] = MappingProxyType(
    {
        "DRAAdminAccess": True,
        "DRAPrioritizedList": True,
        "DRAPartitionableDevices": True,
        "DRADeviceTaints": True,
        "DRADeviceTaintRules": True,
        "DRADeviceBindingConditions": True,
        "DRAResourceClaimDeviceStatus": True,
        "DRAConsumableCapacity": True,
        "DRAListTypeAttributes": False,
        "DRAExtendedResource": True,
        "MatchLabelKeysInPodTopologySpread": True,
        "TaintTolerationComparisonOperators": False,
    }
)

# Allocator switch (the older --features words) -> its Features field and the gates behind it; the
# scheduler turns DeviceBindingAndStatus on only when both of its gates are on (upstream
# dynamicresources.go AllocatorFeatures).
_SWITCHES: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        "adminAccess": ("admin_access", ("DRAAdminAccess",)),
        "prioritizedList": ("prioritized_list", ("DRAPrioritizedList",)),
        "partitionableDevices": ("partitionable_devices", ("DRAPartitionableDevices",)),
        "deviceTaints": ("device_taints", ("DRADeviceTaints",)),
        "deviceBindingAndStatus": (
            "device_binding_and_status",
            ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
        ),
        "consumableCapacity": ("consumable_capacity", ("DRAConsumableCapacity",)),
        "listTypeAttributes": ("list_type_attributes", ("DRAListTypeAttributes",)),
    }
)
_ALLOCATOR_GATES = frozenset(g for _, gates in _SWITCHES.values() for g in gates)


@dataclass(frozen=True)
class FeatureGates:
    """Gate name -> on; a name not in :data:`DEFAULTS` is never stored (parse refuses it)."""

    gates: Mapping[str, bool] = field(default_factory=lambda: DEFAULTS)

    def enabled(self, name: str) -> bool:
        return self.gates[name]

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """``all``, ``none``, allocator switch names and ``Gate=true|false`` entries, comma-separated.

        Raises ValueError naming the entry and the accepted names.
        """
        gates = dict(DEFAULTS)
        words = [w.strip() for w in text.split(",") if w.strip()]
        switches = [w for w in words if "=" not in w]
        if switches or not words:
            gates.update(_switch_gates(switches))
        for word in words:
            if "=" in word:
                name, value = _gate_entry(word)
                gates[name] = value
        return cls(MappingProxyType(gates))

    def allocator(self) -> Features:
        """The allocator's switches, as the scheduler derives them (upstream AllocatorFeatures)."""
        return Features(**{attr: all(self.gates[g] for g in gates) for attr, gates in _SWITCHES.values()})

    def changed(self) -> list[str]:
        """``Gate=value`` for every gate that differs from the 1.36 default, for the answer's notes."""
        return [f"{n}={str(v).lower()}" for n, v in self.gates.items() if DEFAULTS[n] != v]


def _switch_gates(words: list[str]) -> dict[str, bool]:
    """The allocator gates for the older words: ``all``, ``none``, or exactly the switches named."""
    if words == ["all"]:
        return dict.fromkeys(DEFAULTS, True)
    if words in ([], ["none"]):
        return dict.fromkeys(_ALLOCATOR_GATES, False)
    by_lower = {name.lower(): name for name in _SWITCHES}
    unknown = [w for w in words if w.lower() not in by_lower]
    if unknown:
        raise ValueError(
            f"unknown allocator feature(s) {', '.join(unknown)}: use 'all', 'none' or a comma-separated "
            f"list of {', '.join(_SWITCHES)}; or Kubernetes feature gates as Name=true|false "
            f"({', '.join(DEFAULTS)})"
        )
    on = {g for w in words for g in _SWITCHES[by_lower[w.lower()]][1]}
    return {g: g in on for g in _ALLOCATOR_GATES}


def _gate_entry(word: str) -> tuple[str, bool]:
    name, _, value = word.partition("=")
    name, value = name.strip(), value.strip().lower()
    known = {n.lower(): n for n in DEFAULTS}
    if name.lower() not in known:
        raise ValueError(f"{word}: unknown feature gate {name!r}; the dry run knows {', '.join(DEFAULTS)}")
    if value not in ("true", "false"):
        raise ValueError(f"{word}: the value of a feature gate must be true or false")
    return known[name.lower()], value == "true"
