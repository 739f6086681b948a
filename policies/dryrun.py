"""Would these claims, or this pod, fit: per node, with which devices, and if not, why.

This is what kube-scheduler's DynamicResources plugin does around the allocator (dra-reference
4.18; upstream ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``): claims
that are already allocated are checked, not re-allocated (their node selector must match the node
and they must have room for one more consumer); the rest go through one allocator, node after node.
Shared by ``draguard allocate``, the dry-run endpoint and the policy test CLI, so they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policies.allocator import AllocatedState, Allocator, Features, SearchBudget
from policies.allocator.nodes import NodeSelectorError, selector_matches
from policies.allocator.results import allocation_result_json
from policies.api.base import ObjectMeta
from policies.api.core import Node, Pod
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.resource import AllocationResult, ResourceClaim
from policies.cel import SelectorCache
from policies.snapshot import Snapshot

# Upstream ResourceClaimReservedForMaxSize.
RESERVED_FOR_MAX = 256
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


class DryRunInputError(ValueError):
    """The request cannot be answered: a referenced claim or template does not exist."""


@dataclass(frozen=True)
class NodeAnswer:
    """The answer for one node: ``results`` has one entry per claim, in the claims' order."""

    node: str
    allocated: bool
    results: tuple[AllocationResult | None, ...]
    error: str | None = None
    reason: str | None = None
    explanation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "allocated": self.allocated,
            "results": [None if r is None else allocation_result_json(r) for r in self.results],
            "error": self.error,
            "explanation": self.explanation,
        }


def _is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None


def pod_claims(snapshot: Snapshot, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims in ``spec.resourceClaims`` order, instantiating templates not yet used.

    A template claim that the resourceclaim controller already created (recorded in
    ``status.resourceClaimStatuses``) is used as is; otherwise the claim is built from the template
    the way the controller would, so the dry run can answer before the pod exists.
    """
    generated = (
        {s.name: s.resource_claim_name for s in (pod.status.resource_claim_statuses or [])}
        if (pod.status)
        else {}
    )
    namespace = pod.namespace or DEFAULT_NAMESPACE
    claims = []
    for ref in pod.spec.resource_claims or []:
        name = ref.resource_claim_name or generated.get(ref.name)
        if name:
            claim = snapshot.claims.get((namespace, name))
            if claim is None:
                raise DryRunInputError(
                    f"pod {pod.key}: claim {ref.name!r}: resource claim {namespace}/{name} not found"
                )
            claims.append(claim)
            continue
        template_name = ref.resource_claim_template_name or ""
        template = snapshot.templates.get((namespace, template_name))
        if template is None:
            raise DryRunInputError(
                f"pod {pod.key}: claim {ref.name!r}: "
                f"resource claim template {namespace}/{template_name} not found"
            )
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


def claims_to_allocate(snapshot: Snapshot, pod: Pod | None) -> list[ResourceClaim]:
    """The pod's claims when a pod is given, otherwise every unallocated claim in input order."""
    if pod is not None:
        return pod_claims(snapshot, pod)
    # Same-named claims included: the allocator's input is a list, never keyed by name.
    return [c for c in snapshot.all_claims if not _is_allocated(c)]


def allocated_claim_problem(claim: ResourceClaim, node: Node, pod: Pod | None) -> str | None:
    """Why an already-allocated claim cannot be used on ``node``, or None if it can."""
    assert claim.status is not None and claim.status.allocation is not None
    selector = claim.status.allocation.node_selector
    try:
        if selector is not None and not selector_matches(selector, node.name, node.labels):
            return f"claim {claim.key} is allocated for other nodes"
    except NodeSelectorError as err:
        return f"claim {claim.key}: allocation node selector: {err}"
    reserved = claim.status.reserved_for or []
    pod_uid = pod.metadata.uid if pod is not None else None
    if len(reserved) >= RESERVED_FOR_MAX and not any(r.uid == pod_uid for r in reserved if pod_uid):
        return f"claim {claim.key} is already reserved by {RESERVED_FOR_MAX} consumers"
    return None


def snapshot_allocator(
    snapshot: Snapshot,
    features: Features,
    *,
    state: AllocatedState | None = None,
    cel_cache: SelectorCache | None = None,
) -> Allocator:
    """The allocator of a snapshot: its allocated claims, classes, slices and taint rules.

    Build it once per snapshot and features and give it to every :class:`DryRun` on that snapshot
    (``allocator=``): each DryRun asks its own fork, so digested devices, selector verdicts and
    pools per node are computed once, not per question, and each answer is a fresh allocator's.
    ``state``: the snapshot's AllocatedState when the caller has it already; ``cel_cache`` carries
    device bindings and selector results over to the next snapshot's allocator.
    """
    return Allocator(
        features,
        state if state is not None else AllocatedState.from_claims(snapshot.allocated_claims(), features),
        snapshot.classes,
        snapshot.slices,
        taint_rules=snapshot.taint_rules,
        cel_cache=cel_cache,
    )


class DryRun:
    """One warm allocator for a set of claims, asked node after node (as the scheduler does).

    ``allocator``: one :func:`snapshot_allocator` built for ``snapshot`` (or for a snapshot with the
    same allocated claims, classes, slices and taint rules) and ``features``, to fork instead of
    building a new one. Not for use by several threads at once, like the allocator it forks.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        claims: Sequence[ResourceClaim],
        features: Features,
        *,
        pod: Pod | None = None,
        budget: SearchBudget | None = None,
        allocator: Allocator | None = None,
    ) -> None:
        self.claims = tuple(claims)
        self.pod = pod
        self.pending = [c for c in self.claims if not _is_allocated(c)]
        base = allocator if allocator is not None else snapshot_allocator(snapshot, features)
        self.allocator = base.fork(budget=budget or SearchBudget())

    def on_node(self, node: Node) -> NodeAnswer:
        for claim in self.claims:
            if _is_allocated(claim) and (problem := allocated_claim_problem(claim, node, self.pod)):
                return NodeAnswer(node.name, False, (None,) * len(self.claims), reason=problem)
        # quick_reject: a node that lacks enough usable devices is refused without upstream's
        # exhaustive search; same answer, and a whole-cluster question stays fast.
        outcome = self.allocator.allocate(node, self.pending, quick_reject=True)
        explanation = outcome.explanation.to_json() if outcome.explanation is not None else None
        if outcome.error is not None:
            return NodeAnswer(
                node.name,
                False,
                (None,) * len(self.claims),
                error=str(outcome.error),
                reason=str(outcome.error),
            )
        if outcome.results is None:
            reason = outcome.explanation.message() if outcome.explanation is not None else "does not fit"
            return NodeAnswer(
                node.name, False, (None,) * len(self.claims), reason=reason, explanation=explanation
            )
        fresh = iter(outcome.results)
        results = tuple(
            c.status.allocation if c.status is not None and c.status.allocation is not None else next(fresh)
            for c in self.claims
        )
        return NodeAnswer(node.name, True, results)
