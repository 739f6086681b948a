"""What a fitting node's devices cost the pod: footprint, quota charge and stranded devices.

* **Footprint**: the node-allocatable resources (cpu, memory, hugepages) the allocated devices
  yield for the pod (KEP-5517, :mod:`policies.footprint`).
* **Quota**: what draguard's quota rule would charge the namespace for the pod with these devices
  (its requests and limits with the footprint, plus the claims its templates create) and the
  first quota that charge would exceed.
* **Stranded** devices: the devices of the node's own pools (slices with ``nodeName``) still free
  after this allocation. Fewer is tighter packing; devices of pools shared by several nodes are
  left out, as they are not "on" one node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.allocator import AllocatedState
from policies.api.core import Pod, ResourceQuota
from policies.api.quantity import Quantity
from policies.api.resource import AllocationResult, Device, ResourceClaim
from policies.dryrun.answer import QuotaCharge
from policies.footprint import (
    ClaimUse,
    DeviceKey,
    FootprintError,
    add_lists,
    claim_footprint,
    dra_resources,
    referencing_containers,
    yields_node_resources,
)
from policies.quota import (
    Ledger,
    claim_object_usage,
    first_exceeded,
    folded_quotas,
    pod_charge,
    snapshot_ledger,
)
from policies.snapshot import Snapshot

Results = Sequence[AllocationResult | None]
_CostKey = tuple[tuple[DeviceKey, ...], ...]
# The node-allocatable resources the devices yield, and the pod's whole charge.
_Costed = tuple[Mapping[str, Quantity], Mapping[str, Quantity]]


@dataclass(frozen=True)
class Inventory:
    """The snapshot's devices by key, each node's free devices of its own pools, and the devices
    that yield node-allocatable resources: computed once per snapshot."""

    devices: Mapping[DeviceKey, Device]
    free: Mapping[str, frozenset[DeviceKey]]
    yielding: frozenset[DeviceKey]

    @classmethod
    def of(cls, snapshot: Snapshot, state: AllocatedState) -> Inventory:
        devices = snapshot.devices
        node_of = {
            (s.spec.driver, s.spec.pool.name): s.spec.node_name for s in snapshot.slices if s.spec.node_name
        }
        taken = {(d.driver, d.pool, d.device) for d in state.allocated_devices}
        free: dict[str, set[DeviceKey]] = {}
        for key in devices:
            node = node_of.get(key[:2])
            if node and key not in taken:
                free.setdefault(node, set()).add(key)
        return cls(
            devices,
            MappingProxyType({n: frozenset(keys) for n, keys in free.items()}),
            frozenset(k for k, d in devices.items() if yields_node_resources(d)),
        )

    def stranded(self, node: str, results: Results) -> int:
        chosen = {
            (r.driver, r.pool, r.device)
            for result in results
            if result is not None and result.devices is not None
            for r in result.devices.results or ()
            if not r.admin_access
        }
        return len(self.free.get(node, frozenset()) - chosen)


def _quantities(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(resources.items())}


@dataclass(frozen=True)
class Costs:
    """How one pod's fitting answers are priced. The price depends on the answer only through the
    devices that yield node resources, so answers that pick none of those, or the same ones, share
    one computed price. An answer consuming capacity of such a device is priced on its own
    (quantities equal in value may print differently)."""

    pod: Pod
    references: tuple[tuple[str, ...], ...]
    created_usage: Mapping[str, Quantity]
    quotas: tuple[ResourceQuota, ...]
    ledger_usage: Mapping[str, Quantity]
    inventory: Inventory
    _priced: dict[_CostKey, _Costed | str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        pod: Pod,
        claims: Sequence[ResourceClaim],
        snapshot: Snapshot,
        inventory: Inventory,
        ledger_usage: Mapping[str, Quantity] | None = None,
    ) -> Costs:
        """``claims``: the pod's, in results order; those not in ``snapshot`` are the ones its
        templates (or the question) create, which count against the per-class device quotas.
        ``ledger_usage``: the namespace's DRA charges in ``snapshot``, when the caller has them
        already (every reserved claim's charge is computed again otherwise)."""
        namespace = pod.namespace
        created = [c for c in claims if (c.namespace, c.name) not in snapshot.claims]
        quotas = tuple(folded_quotas(snapshot, namespace))
        if ledger_usage is None:
            ledger = snapshot_ledger(snapshot, namespace) if quotas else Ledger()
            ledger_usage = ledger.usage(namespace)
        names = [ref.name for ref in pod.spec.resource_claims or ()]
        return cls(
            pod=pod,
            references=tuple(referencing_containers(pod, n) for n in names)
            + ((),) * (len(claims) - len(names)),
            created_usage=add_lists(*(claim_object_usage(c.spec.devices, snapshot.classes) for c in created)),
            quotas=quotas,
            ledger_usage=ledger_usage,
            inventory=inventory,
        )

    def uses(self, results: Results) -> list[ClaimUse]:
        """The claims as the pod would use them with these results; raises FootprintError."""
        return [
            ClaimUse(claim_footprint(r, self.inventory.devices), n)
            for r, n in zip(results, self.references, strict=True)
        ]

    def price(self, results: Results) -> tuple[dict[str, str], QuotaCharge] | str:
        """Footprint and quota charge, or why the footprint cannot be computed."""
        found = self._costed(results)
        if isinstance(found, str):
            return found
        footprint, charge = found
        exceeded = first_exceeded(self.quotas, charge, self.ledger_usage)
        return _quantities(footprint), QuotaCharge(
            charge=_quantities(charge), exceeded=exceeded.message() if exceeded else None
        )

    def charge(self, results: Results) -> Mapping[str, Quantity] | str:
        """What the quota rule charges the namespace for the pod with these results, or why the
        footprint cannot be computed."""
        found = self._costed(results)
        return found if isinstance(found, str) else found[1]

    def _costed(self, results: Results) -> _Costed | str:
        key = self._key(results)
        if key is None:
            return self._cost(results)
        found = self._priced.get(key)
        if found is None:
            found = self._priced[key] = self._cost(results)
        return found

    def _key(self, results: Results) -> _CostKey | None:
        """Per claim, the devices claim_footprint counts that yield anything, in order (the others
        add an empty footprint); None when one of those has consumedCapacity."""
        if not self.inventory.yielding:  # the usual cluster: no device yields node resources
            return ((),) * len(results)
        key = []
        for result in results:
            counted: list[DeviceKey] = []
            for r in (result.devices.results or ()) if result is not None and result.devices else ():
                device = (r.driver, r.pool, r.device)
                if r.admin_access or device not in self.inventory.yielding:
                    continue
                if r.consumed_capacity is not None:
                    return None
                counted.append(device)
            key.append(tuple(counted))
        return tuple(key)

    def _cost(self, results: Results) -> _Costed | str:
        try:
            uses = self.uses(results)
        except FootprintError as err:
            return str(err)
        return dra_resources(uses), add_lists(pod_charge(self.pod, uses), self.created_usage)
