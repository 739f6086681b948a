"""Rule ``sharing``: who may share a claim whose devices hand out node resources.

A device that *is* node capacity (CPU cores of a CPU driver, memory) or needs some (an accelerator
pinning host memory) cannot be shared freely: the scheduler charges its footprint to the pods that
use it. Each device has a sharing policy (dra-reference 6.3):

* ``None``: a claim holding the device is used by exactly one container of one pod (what CPU
  drivers need: one claim, one container's cpuset);
* ``SamePod``: any containers of one pod, never a second pod (upstream's rule for claims whose
  devices map node resources directly);
* ``MultiPod``: several pods, each charged its own footprint (upstream's rule for overhead-only
  devices).

The policy comes from, highest first: the device attribute ``draguard.io/sharingPolicy`` (the
driver knows its devices best), the first matching ``sharing.policies`` entry of the config (by
driver, by the DeviceClass of the request that got the device, by CEL selector), else the default
upstream derives: a direct mapping means ``SamePod``, overhead only ``MultiPod``, and a device
without node-allocatable resources is unrestricted. A claim takes its strictest device's policy.

It is enforced where consumers are added: on Pod CREATE (the pod's claims already reserved by
another pod, and container references inside the pod) and on the ResourceClaim status update that
adds a consumer to ``reservedFor``. The scheduler reserves a claim before it binds the pod, and the
API server serialises status updates with resourceVersion, so checking that update is race free: two
pods cannot both be added to a SamePod claim, whatever the order of their pod creations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.api.core import Pod
from policies.api.resource import (
    Device,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from policies.cel import EvalError, bind_device, compile_expression
from policies.config import SharingPolicyRule
from policies.footprint import DeviceKey, declares_mapping, referencing_containers
from policies.rules.common import a_few, object_key
from policies.rules.engine import Context, Finding, Request, RuleUnavailable
from policies.scheduler.podinfo import claim_names
from policies.snapshot import Snapshot

ATTRIBUTE = "draguard.io/sharingPolicy"
# Strictest first: a claim takes the first of these that any of its devices has.
STRICTNESS = ("None", "SamePod", "MultiPod")
# The fix a message gives when a second pod wants the claim.
OWN_CLAIM = "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
# Why each default applies, for messages.
DEFAULT_REASONS = {
    "SamePod": "default: the device maps node-allocatable resources directly",
    "MultiPod": "default: the device only has node-allocatable overhead",
}


@dataclass(frozen=True)
class DevicePolicy:
    """A device's sharing policy and where it comes from (said in messages)."""

    device: str
    policy: str
    source: str


def _request_class(claim: ResourceClaim, request: str) -> str | None:
    """The DeviceClass of the request (``parent/sub`` for a firstAvailable alternative)."""
    parent, _, sub = request.partition("/")
    for r in claim.spec.devices.requests or ():
        if r.name != parent:
            continue
        if r.exactly is not None and not sub:
            return r.exactly.device_class_name
        return next((s.device_class_name for s in r.first_available or () if s.name == sub), None)
    return None


def _entry_matches(entry: SharingPolicyRule, driver: str, pool: str, device: Device, cls: str | None) -> bool:
    if entry.driver is not None and entry.driver != driver:
        return False
    if entry.device_class_name is not None and entry.device_class_name != cls:
        return False
    if entry.selector is None:
        return True
    try:
        return compile_expression(entry.selector).matches(bind_device(driver, device, pool=pool))
    except EvalError:
        return False


def device_policy(
    result: DeviceRequestAllocationResult,
    device: Device,
    claim: ResourceClaim,
    entries: Sequence[SharingPolicyRule],
) -> DevicePolicy | None:
    """The sharing policy of one allocated device; None when the device is unrestricted."""
    name = f"{result.driver}/{result.pool}/{result.device}"
    attribute = (device.attributes or {}).get(ATTRIBUTE)
    if attribute is not None and attribute.string in STRICTNESS:
        return DevicePolicy(name, attribute.string, f"device attribute {ATTRIBUTE}")
    cls = _request_class(claim, result.request)
    for i, entry in enumerate(entries):
        if _entry_matches(entry, result.driver, result.pool, device, cls):
            return DevicePolicy(name, entry.policy, f"draguard config sharing.policies[{i}]")
    if declares_mapping(device):
        return DevicePolicy(name, "SamePod", DEFAULT_REASONS["SamePod"])
    if device.node_allocatable_resources:
        return DevicePolicy(name, "MultiPod", DEFAULT_REASONS["MultiPod"])
    return None


def _allocated(claim: ResourceClaim) -> list[DeviceRequestAllocationResult]:
    """The claim's allocation results; none while it is not allocated."""
    allocation = claim.status.allocation if claim.status is not None else None
    return (allocation.devices.results or []) if allocation is not None and allocation.devices else []


def claim_policy(
    claim: ResourceClaim, devices: Mapping[DeviceKey, Device], entries: Sequence[SharingPolicyRule]
) -> DevicePolicy | None:
    """The strictest policy among the claim's allocated devices (admin access excluded: an admin
    looks at a device, it does not get it); None when none is restricted or it is not allocated."""
    results = _allocated(claim)
    found = []
    for result in results:
        device = devices.get((result.driver, result.pool, result.device))
        if device is None or result.admin_access:
            continue
        policy = device_policy(result, device, claim, entries)
        if policy is not None:
            found.append(policy)
    return min(found, key=lambda p: STRICTNESS.index(p.policy), default=None)


def _unknown_devices(claim: ResourceClaim, devices: Mapping[DeviceKey, Device]) -> list[str]:
    """The claim's allocated devices (admin access aside) that ``devices`` does not hold: a device
    the snapshot has not seen has no known policy, and taking it as unrestricted let a second pod
    onto a SamePod claim (issue 25's soak)."""
    results = _allocated(claim)
    return [
        f"{r.driver}/{r.pool}/{r.device}"
        for r in results
        if not r.admin_access and (r.driver, r.pool, r.device) not in devices
    ]


def _consumer(ref: ResourceClaimConsumerReference, namespace: str) -> str:
    kind = "pod" if ref.resource == "pods" and not ref.api_group else ref.resource
    return f"{kind} {namespace}/{ref.name}"


def _restriction(policy: DevicePolicy) -> str:
    who = "one container of one pod" if policy.policy == "None" else "the containers of one pod"
    return (
        f"its device {policy.device} has sharing policy {policy.policy} ({policy.source}), "
        f"so only {who} may use it"
    )


def _containers_problem(
    who: str, shape: Pod, claims: Sequence[tuple[str, str]], claim: ResourceClaim, policy: DevicePolicy
) -> str | None:
    """For ``None``: more than one container of the pod ``who`` (its spec in ``shape``, its
    ``(pod claim name, claim name)`` pairs in ``claims``) names the claim."""
    if policy.policy != "None":
        return None
    names = [c for own, name in claims if name == claim.name for c in referencing_containers(shape, own)]
    if len(names) < 2:
        return None
    return (
        f"containers {a_few(sorted(set(names)))} of pod {who} all reference claim {claim.key}, "
        f"but {_restriction(policy)}; give each container its own claim"
    )


class SharingRule:
    """Deny a second pod (or, for ``None``, a second container) on a claim whose devices forbid it."""

    name = "sharing"
    mutating = False

    def applies(self, request: Request, ctx: Context) -> bool:
        if request.kind == "Pod":
            return (
                request.operation == "CREATE"
                and not request.sub_resource
                and isinstance(request.obj, Pod)
                and bool(request.obj.spec.resource_claims)
            )
        return (
            request.resource == "resourceclaims"
            and request.sub_resource == "status"
            and request.operation == "UPDATE"
            and isinstance(request.obj, ResourceClaim)
        )

    def costly(self, request: Request, ctx: Context) -> bool:
        return False  # reads the pod's own claims and their devices

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        devices = ctx.snapshot.devices
        entries = ctx.config.rules.sharing.policies
        if isinstance(request.obj, Pod):
            # Users read from a stale snapshot may be gone or missing: only a fresh one judges them
            # here. The claim's reservation, judged on its own update, is the guard that cannot
            # race; refusing every pod during a watch outage guarded nothing more (issue 25's soak).
            problems = _pod_problems(request.obj, ctx.snapshot, devices, entries, ctx.snapshot_fresh)
        else:
            # The update carries the claim's users before and after: only its devices' policies
            # come from the snapshot, which may be stale as long as it holds them.
            assert isinstance(request.obj, ResourceClaim)
            old = request.old if isinstance(request.old, ResourceClaim) else None
            problems = _reservation_problems(request.obj, old, ctx.snapshot, devices, entries)
        return [Finding("deny", problem) for problem in problems]


def _pod_problems(
    pod: Pod,
    snapshot: Snapshot,
    devices: Mapping[DeviceKey, Device],
    entries: Sequence[SharingPolicyRule],
    users_known: bool,
) -> list[str]:
    """What forbids ``pod`` its claims: another pod the claim is reserved for (judged only when
    ``users_known``), or, for ``None``, several of its containers naming the claim."""
    problems = []
    for ref in pod.spec.resource_claims or ():
        claim = snapshot.claims.get((pod.namespace, ref.resource_claim_name or ""))
        policy = claim_policy(claim, devices, entries) if claim is not None else None
        if claim is None or policy is None or policy.policy == "MultiPod":
            continue
        assert claim.status is not None
        others = [
            _consumer(r, claim.namespace)
            for r in (claim.status.reserved_for or () if users_known else ())
            if not (pod.metadata.uid and r.uid == pod.metadata.uid)
        ]
        if others:
            problems.append(
                f"pod {object_key(pod)} cannot use claim {claim.key}: it is already reserved by "
                f"{a_few(others)}, and {_restriction(policy)}; {OWN_CLAIM}"
            )
        problem = _containers_problem(object_key(pod), pod, claim_names(pod), claim, policy)
        if problem:
            problems.append(problem)
    return problems


def _reservation_problems(
    claim: ResourceClaim,
    old: ResourceClaim | None,
    snapshot: Snapshot,
    devices: Mapping[DeviceKey, Device],
    entries: Sequence[SharingPolicyRule],
) -> list[str]:
    reserved = (claim.status.reserved_for or []) if claim.status is not None else []
    before = {r.uid for r in ((old.status.reserved_for or []) if old is not None and old.status else [])}
    added = [r for r in reserved if r.uid not in before]
    if not added:
        return []
    unknown = _unknown_devices(claim, devices)
    if unknown:
        raise RuleUnavailable(
            f"the cluster snapshot does not hold device {a_few(unknown)} of claim {claim.key}: its sharing "
            "policy is unknown"
        )
    policy = claim_policy(claim, devices, entries)
    if policy is None or policy.policy == "MultiPod":
        return []
    if len(reserved) > 1:
        new = [_consumer(r, claim.namespace) for r in added]
        consumers = [_consumer(r, claim.namespace) for r in reserved]
        return [
            f"claim {claim.key} cannot be reserved for {a_few(new)}: it would be shared by "
            f"{a_few(consumers)}, but {_restriction(policy)}; {OWN_CLAIM}"
        ]
    problems = []
    for ref in added:
        pod = snapshot.pods.get((claim.namespace, ref.name)) if ref.resource == "pods" else None
        if pod is None and ref.resource == "pods" and policy.policy == "None":
            raise RuleUnavailable(
                f"the cluster snapshot does not hold pod {claim.namespace}/{ref.name}: which of its "
                f"containers use claim {claim.key} is unknown"
            )
        problem = _containers_problem(pod.key, pod.shape, pod.claims, claim, policy) if pod else None
        if problem:
            problems.append(problem)
    return problems
