"""The dry run's answer, one shape for ``draguard allocate -o json|yaml``, ``POST /v1/dryrun``, the
policy tests and audit; the endpoint's OpenAPI schema is generated from these models, and the two
documents (``DryRunAnswer``, ``DryRunResponse``) are versioned (:mod:`policies.outputs`).

Per pod: whether it fits, the scheduler's own message when it does not (what ``kubectl describe
pod`` would show in its PodScheduled condition), and per node: the plugin that refused it with
upstream's reason strings, or the devices, the default scoring and what the devices cost.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from policies.outputs import API_VERSION, OutputModel, Version


class QuotaCharge(OutputModel):
    charge: dict[str, str] = Field(description="what draguard's quota rule would charge the namespace")
    exceeded: str | None = Field(default=None, description="the first quota the charge would exceed")


class Timing(OutputModel):
    first_ns: int
    median_ns: int


class NodeAnswer(OutputModel):
    """One node: refused (``plugin``, ``reasons``) or fitting (``results``, ``score``, costs)."""

    node: str
    fits: bool
    plugin: str | None = Field(default=None, description="the filter plugin that refused the node")
    reasons: list[str] = Field(default=[], description="the plugin's reasons, upstream's words")
    detail: str | None = Field(default=None, description="draguard's explanation of the refusal")
    error: str | None = Field(
        default=None, description="the allocator's error: fatal (aborts the attempt), or its search giving up"
    )
    explanation: dict[str, Any] | None = Field(
        default=None, description="how the node's devices fared against each request (DynamicResources)"
    )
    results: list[dict[str, Any] | None] = Field(
        default=[],
        description="one per claim of the pod, in the answer's claims order: the resource.k8s.io/v1 "
        "AllocationResult as the API server would store it (null: nothing to allocate)",
    )
    score: int | None = Field(default=None, description="the default profile's total score (fitting nodes)")
    scores: dict[str, int] | None = Field(default=None, description="each scoring plugin's weighted score")
    rank: int | None = Field(default=None, ge=1, description="1 is best; equal scores share a rank")
    stranded: int | None = Field(
        default=None, ge=0, description="devices of the node's own pools still free after this allocation"
    )
    footprint: dict[str, str] | None = Field(
        default=None, description="node-allocatable resources the devices yield for the pod (KEP-5517)"
    )
    footprint_error: str | None = None
    quota: QuotaCharge | None = None
    timing: Timing | None = None


class PodAnswer(OutputModel):
    """One pod's scheduling attempt(s)."""

    pod: str = Field(description="namespace/name")
    claims: list[str] = Field(description="the claims the results are for, in order")
    fits: bool
    reason: str | None = Field(
        default=None,
        description="the PodScheduled condition's reason when it fits nowhere: Unschedulable "
        "or SchedulerError",
    )
    message: str = Field(description="the scheduler's message when it fits nowhere; else where it fits")
    preferred: list[str] = Field(
        default=[],
        description="the fitting nodes with the best score (the scheduler picks one of them at random)",
    )
    placed_on: str | None = Field(default=None, description="with --sequence: the node the pod was placed on")
    nominated: str | None = Field(
        default=None,
        description="where it fits nowhere: the node DefaultPreemption would nominate after evicting victims",
    )
    victims: list[str] = Field(default=[], description="the pods preemption would evict (namespace/name)")
    earlier_attempts: list[str] = Field(
        default=[], description="messages of attempts after which the scheduler deallocated a claim"
    )
    error: str | None = Field(default=None, description="why the pod cannot be asked about at all")
    not_checked: list[str] = Field(default=[], description="what the answer does not account for")
    nodes: list[NodeAnswer] = Field(default=[])
    checked: int = Field(default=0, ge=0, description="nodes asked")
    total: int = Field(default=0, ge=0, description="nodes the question was about")
    fitting: int = Field(default=0, ge=0)
    complete: bool = True


class DryRunAnswer(OutputModel):
    """``draguard allocate``'s document: every pending pod, in input order."""

    api_version: Version = API_VERSION
    kind: Literal["DryRunAnswer"] = "DryRunAnswer"
    pods: list[PodAnswer]
    features: list[str] = Field(default=[], description="feature gates changed from 1.36's defaults")


class DryRunResponse(PodAnswer):
    """``POST /v1/dryrun``'s answer: the one pod's, and how long it took."""

    elapsed_ms: float = Field(ge=0)
    api_version: Version = API_VERSION
    kind: Literal["DryRunResponse"] = "DryRunResponse"
