"""A pod's ResourceClaims as the DynamicResources plugin finds them, and whether an allocated one
can be used on a node.

Upstream ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``
(``foreachPodResourceClaim``) and ``k8s.io/dynamic-resource-allocation/resourceclaim``
(``Name``, ``CanBeReserved``, ``IsReservedForPod``). Unlike the scheduler, which waits for the
resourceclaim controller, the dry run builds a template's claim itself, the way the controller
would, so it can answer before the pod exists.
"""

from __future__ import annotations

from policies.allocator.nodes import NodeSelectorError, selector_matches
from policies.api.base import ObjectMeta
from policies.api.core import Node, Pod
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.resource import ResourceClaim
from policies.snapshot import Snapshot

# Upstream ResourceClaimReservedForMaxSize.
RESERVED_FOR_MAX = 256
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


class ClaimNotFoundError(ValueError):
    """A claim or template the pod refers to does not exist: the pod cannot be asked about."""


def is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None


def is_reserved_for(claim: ResourceClaim, pod: Pod) -> bool:
    uid = pod.metadata.uid
    reserved = (claim.status.reserved_for or []) if claim.status is not None else []
    return bool(uid) and any(r.uid == uid for r in reserved)


def can_be_reserved(claim: ResourceClaim) -> bool:
    return len((claim.status.reserved_for or []) if claim.status else []) < RESERVED_FOR_MAX


def pod_claims(snapshot: Snapshot, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims in ``spec.resourceClaims`` order, instantiating templates not yet used.

    A template claim that the resourceclaim controller already created (recorded in
    ``status.resourceClaimStatuses``) is used as is; otherwise the claim is built from the template
    the way the controller would.
    """
    generated = (
        {s.name: s.resource_claim_name for s in (pod.status.resource_claim_statuses or [])}
        if pod.status
        else {}
    )
    namespace = pod.namespace or DEFAULT_NAMESPACE
    claims = []
    for ref in pod.spec.resource_claims or []:
        name = ref.resource_claim_name or generated.get(ref.name)
        if name:
            claim = snapshot.claims.get((namespace, name))
            if claim is None:
                raise ClaimNotFoundError(
                    f"pod {pod.key}: claim {ref.name!r}: resource claim {namespace}/{name} not found"
                )
            claims.append(claim)
            continue
        template_name = ref.resource_claim_template_name or ""
        template = snapshot.templates.get((namespace, template_name))
        if template is None:
            missing = f"resource claim template {namespace}/{template_name} not found"
            raise ClaimNotFoundError(f"pod {pod.key}: claim {ref.name!r}: {missing}")
        meta = template.spec.metadata or ObjectMeta()
        annotations = {**(meta.annotations or {}), POD_CLAIM_NAME_ANNOTATION: ref.name}
        claims.append(
            ResourceClaim(
                apiVersion="resource.k8s.io/v1",
                kind="ResourceClaim",
                metadata=ObjectMeta(
                    name=f"{pod.name}-{ref.name}",
                    namespace=pod.namespace,
                    labels=meta.labels,
                    annotations=annotations,
                ),
                spec=template.spec.spec,
            )
        )
    return claims


def allocated_claim_problem(claim: ResourceClaim, node: Node, pod: Pod | None) -> str | None:
    """Why an already-allocated claim cannot be used on ``node``, or None if it can (in draguard's
    words, for the prescheduled rule)."""
    assert claim.status is not None and claim.status.allocation is not None
    selector = claim.status.allocation.node_selector
    try:
        if selector is not None and not selector_matches(selector, node.name, node.labels):
            return f"claim {claim.key} is allocated for other nodes"
    except NodeSelectorError as err:
        return f"claim {claim.key}: allocation node selector: {err}"
    if not can_be_reserved(claim) and not (pod is not None and is_reserved_for(claim, pod)):
        return f"claim {claim.key} is already reserved by {RESERVED_FOR_MAX} consumers"
    return None
