"""Rule ``prescheduled``: pods created with ``spec.nodeName`` whose devices nobody will allocate.

Such a pod bypasses the scheduler, and the scheduler is the only component that allocates claims:
the resourceclaim controller only reserves claims that are already allocated, and the kubelet
refuses to start the pod until every claim is allocated and reserved for it (dra-reference 7). So
the pod is bound to the node, holds its CPU and memory, and may wait forever. The validating rule
denies it unless every claim already exists, is allocated, and can be used on that node; the fix
it names is a ``kubernetes.io/hostname`` node selector, which pins the pod just as well but lets the
scheduler allocate.

With ``prescheduled.mutate: true`` the mutating variant applies that fix itself: it moves the node
into ``spec.nodeSelector``. The API server runs mutating webhooks before validating ones, so the
validating rule does not deny what the mutating one will fix (it sees the rewritten pod then, and
the offline commands, which run both on the original, must agree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.api.base import ObjectMeta
from policies.api.core import Node, Pod, PodResourceClaim
from policies.dryrun import allocated_claim_problem
from policies.rules.common import object_key
from policies.rules.engine import Context, Finding, Request, RuleUnavailable
from policies.snapshot import Snapshot

HOSTNAME_LABEL = "kubernetes.io/hostname"


def _applies(request: Request) -> bool:
    pod = request.obj
    return (
        request.kind == "Pod"
        and request.operation == "CREATE"
        and not request.sub_resource
        and isinstance(pod, Pod)
        and bool(pod.spec.node_name)
        and bool(pod.spec.resource_claims)
    )


def _pod(request: Request, ctx: Context) -> Pod:
    if not ctx.snapshot_fresh:
        raise RuleUnavailable("the cluster snapshot is stale: the pod's claims cannot be checked")
    assert isinstance(request.obj, Pod)
    return request.obj


def claim_problems(pod: Pod, snapshot: Snapshot) -> list[str]:
    """What keeps each of the pod's claims from being usable on ``spec.nodeName`` without the scheduler."""
    node_name = pod.spec.node_name or ""
    # Unknown node: its name still decides matchFields selectors, its labels are taken as empty.
    node = snapshot.nodes.get(node_name) or Node(metadata=ObjectMeta(name=node_name))
    problems = []
    for ref in pod.spec.resource_claims or ():
        problem = _claim_problem(pod, ref, snapshot, node)
        if problem:
            problems.append(f'pod claim "{ref.name}": {problem}')
    return problems


def _claim_problem(pod: Pod, ref: PodResourceClaim, snapshot: Snapshot, node: Node) -> str | None:
    if ref.resource_claim_template_name and not ref.resource_claim_name:
        return (
            f"comes from ResourceClaimTemplate {pod.namespace}/{ref.resource_claim_template_name}: its claim "
            "is only created for the pod, and only the scheduler would allocate it"
        )
    if not ref.resource_claim_name:
        return "sets neither resourceClaimName nor resourceClaimTemplateName"
    claim = snapshot.claims.get((pod.namespace, ref.resource_claim_name))
    if claim is None:
        return f"claim {pod.namespace}/{ref.resource_claim_name} does not exist"
    if claim.status is None or claim.status.allocation is None:
        return f"claim {claim.key} is not allocated"
    return allocated_claim_problem(claim, node, None)


def hostname_of(snapshot: Snapshot, node_name: str) -> str | None:
    """The node's ``kubernetes.io/hostname`` label (its name if unlabelled); None for an unknown node."""
    node = snapshot.nodes.get(node_name)
    return None if node is None else node.labels.get(HOSTNAME_LABEL, node.name)


def rewrite(pod: Pod, snapshot: Snapshot) -> tuple[str, tuple[Mapping[str, Any], ...]] | None:
    """The hostname and the JSONPatch moving ``spec.nodeName`` into a node selector on it; None when
    the hostname is not known (node missing from the snapshot) or the pod already selects another."""
    hostname = hostname_of(snapshot, pod.spec.node_name or "")
    if hostname is None:
        return None
    current = pod.spec.node_selector
    if current is not None and current.get(HOSTNAME_LABEL, hostname) != hostname:
        return None
    add: dict[str, Any] = (
        {"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME_LABEL: hostname}}
        if current is None
        else {"op": "add", "path": f"/spec/nodeSelector/{_pointer(HOSTNAME_LABEL)}", "value": hostname}
    )
    return hostname, ({"op": "remove", "path": "/spec/nodeName"}, add)


def _pointer(key: str) -> str:
    """A map key as a JSON Pointer token (RFC 6901): ``~`` and ``/`` are escaped."""
    return key.replace("~", "~0").replace("/", "~1")


class PrescheduledRule:
    """Deny pods pinned with spec.nodeName whose claims are not allocated for that node."""

    name = "prescheduled"
    mutating = False

    def applies(self, request: Request, ctx: Context) -> bool:
        return _applies(request)

    def costly(self, request: Request, ctx: Context) -> bool:
        return False  # reads the pod's own claims

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        pod = _pod(request, ctx)
        problems = claim_problems(pod, ctx.snapshot)
        if not problems:
            return []
        node = pod.spec.node_name or ""
        hostname = hostname_of(ctx.snapshot, node)
        unknown = " (a node the cluster snapshot does not have)" if hostname is None else ""
        selector = f"spec.nodeSelector {{{HOSTNAME_LABEL}: {hostname or node}}}"
        return [Finding("deny", (
            f"pod {object_key(pod)} sets spec.nodeName {node}{unknown}, which bypasses the scheduler, so "
            f"nothing will allocate its devices: {'; '.join(problems)}. Use a {HOSTNAME_LABEL} node selector "
            f"instead of spec.nodeName ({selector} or a required node affinity) so that the scheduler "
            "allocates the devices"
        ))]


class PrescheduledRewrite:
    """With ``prescheduled.mutate``: move such a pod's spec.nodeName into a hostname node selector."""

    name = "prescheduled"
    mutating = True

    def applies(self, request: Request, ctx: Context) -> bool:
        return ctx.config.rules.prescheduled.mutate and _applies(request)

    def costly(self, request: Request, ctx: Context) -> bool:
        return False  # reads the node the pod names

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        pod = _pod(request, ctx)
        if not claim_problems(pod, ctx.snapshot):
            return []
        planned = rewrite(pod, ctx.snapshot)
        if planned is None:
            return []
        hostname, patch = planned
        return [Finding("warn", (
            f"pod {object_key(pod)}: draguard replaced spec.nodeName {pod.spec.node_name} with the node "
            f"selector {HOSTNAME_LABEL}={hostname} so that the scheduler allocates the pod's devices"
        ), patch)]
