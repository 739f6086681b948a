"""The dry-run endpoint's question: its request body, decoded, checked and answered.

Request (JSON): ``{"pod": POD}`` or ``{"claims": [...], "claimTemplates": [...]}`` (both may be
combined: the claims and templates a pod refers to, before they exist), plus ``"nodes": [names]``
to ask only those nodes and ``"limit": N`` to cap how many node answers come back. Without a pod,
the claims and templates are asked as one pod using all of them would be: a pod named ``dryrun`` in
their namespace referring to each claim by name and each template, in request order.

The answer is :class:`policies.dryrun.answer.DryRunResponse`: the pod's answer as ``draguard
allocate`` gives it, fitting nodes first (best score first), then the others by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from policies.allocator import SearchBudget
from policies.api.base import ObjectMeta, TypedObject
from policies.api.core import Pod, PodResourceClaim, PodSpec
from policies.api.defaults import apply_defaults
from policies.api.kinds import DEFAULT_NAMESPACE, DecodeError, decode, validation_problems
from policies.api.resource import ResourceClaim, ResourceClaimTemplate
from policies.dryrun.answer import PodAnswer
from policies.dryrun.headroom import Headroom, headroom
from policies.dryrun.run import SYNTHETIC_POD, DryRun, Prepared, Question, to_answer, with_uid
from policies.priority import Priorities, PriorityRefused
from policies.scheduler.claims import ClaimNotFoundError
from policies.scheduler.profile import Pace
from policies.snapshot import Snapshot
from policies.validation import render, validate

T = TypeVar("T", bound=TypedObject)
REFUSED = "the API server would refuse these objects"


class RequestError(ValueError):
    """A malformed request (HTTP 400): one line per problem, each naming the field."""

    def __init__(self, problems: Sequence[str]) -> None:
        summary = (
            problems[0] if len(problems) == 1 else f"{problems[0]} (and {len(problems) - 1} more problems)"
        )
        super().__init__(f"invalid dry-run request: {summary}")
        self.problems = tuple(problems)


class UnanswerableError(ValueError):
    """A well-formed request about objects that cannot be used (HTTP 422)."""

    def __init__(self, summary: str, problems: Sequence[str]) -> None:
        super().__init__(summary)
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Limits:
    """The endpoint's caps on one request."""

    max_claims: int = 32
    max_nodes: int = 5000
    default_limit: int = 20


class DryRunRequest(BaseModel):
    """The request body; the objects inside are decoded as API objects afterwards."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        strict=True,
        frozen=True,
        json_schema_extra={
            "anyOf": [{"required": ["pod"]}, {"required": ["claims"]}, {"required": ["claimTemplates"]}]
        },
    )

    pod: dict[str, Any] | None = Field(default=None, description="a v1 Pod that refers to claims")
    claims: list[dict[str, Any]] = Field(
        default_factory=list,
        description="resource.k8s.io/v1 ResourceClaims, unallocated, to create with the pod",
    )
    claim_templates: list[dict[str, Any]] = Field(
        default_factory=list, description="resource.k8s.io/v1 ResourceClaimTemplates the pod refers to"
    )
    nodes: list[str] | None = Field(default=None, description="ask only these nodes (default: all)")
    limit: int | None = Field(default=None, ge=1, description="node answers to return")
    headroom: bool = Field(
        default=False,
        description="place copies of the pod one after another until one does not fit (or max): the "
        "answer is then a HeadroomResponse",
    )
    max: int | None = Field(default=None, ge=1, description="with headroom: the most copies to place")


@dataclass(frozen=True)
class HttpQuestion:
    """A decoded, defaulted request: the pod to place (possibly the synthetic one) and its objects."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]
    templates: tuple[ResourceClaimTemplate, ...]
    nodes: tuple[str, ...] | None
    limit: int
    synthetic: bool
    headroom: bool = False
    max: int | None = None


def _decoded(raw: Any, where: str, kind: type[T]) -> T:
    try:
        obj = decode(raw)
    except DecodeError as err:
        raise RequestError(
            [p.replace("<root>", where) if p.startswith("<root>") else f"{where}.{p}" for p in err.problems]
        ) from None
    if not isinstance(obj, kind):
        raise RequestError([f"{where}.kind: Invalid value: {obj.kind!r}: must be {kind.__name__}"])
    return obj


def _in_namespace(obj: T, namespace: str, where: str) -> T:
    """The object with ``namespace`` filled in when it has none (kubectl's default), else checked."""
    if obj.namespace and obj.namespace != namespace:
        raise RequestError(
            [
                f"{where}.metadata.namespace: Invalid value: {obj.namespace!r}: "
                f"must be {namespace!r}, the namespace of the pod (or of the first object)"
            ]
        )
    if obj.namespace:
        return obj
    return obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"namespace": namespace})})


def _check_counts(body: DryRunRequest, limits: Limits) -> None:
    problems = [
        f"{name}: Too many: {len(items)}: must have at most {cap} items"
        for name, items, cap in (
            ("claims", body.claims, limits.max_claims),
            ("claimTemplates", body.claim_templates, limits.max_claims),
            ("nodes", body.nodes or [], limits.max_nodes),
        )
        if len(items) > cap
    ]
    if body.limit is not None and body.limit > limits.max_nodes:
        problems.append(f"limit: Invalid value: {body.limit}: must be at most {limits.max_nodes}")
    duplicates = sorted({n for n in body.nodes or [] if (body.nodes or []).count(n) > 1})
    problems += [f"nodes: Duplicate value: {n!r}" for n in duplicates]
    if body.pod is None and not body.claims and not body.claim_templates:
        problems.append("pod: Required value: give a pod, or claims and/or claimTemplates to allocate")
    if body.headroom and body.nodes is not None:
        problems.append("nodes: Forbidden: a headroom places copies on any node; leave nodes out")
    if body.max is not None and not body.headroom:
        problems.append('max: Forbidden: only with "headroom": true')
    if problems:
        raise RequestError(problems)


def parse_request(raw: Any, limits: Limits, now: datetime) -> HttpQuestion:
    """The decoded body as a question; raises RequestError naming the field for anything malformed."""
    if not isinstance(raw, dict):
        raise RequestError(
            ["body: Invalid value: must be a JSON object with pod, claims, claimTemplates, nodes or limit"]
        )
    try:
        parsed = DryRunRequest.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as err:
        known = "unknown field (known: pod, claims, claimTemplates, nodes, limit, headroom, max)"
        raise RequestError(
            [p.replace("Extra inputs are not permitted", known) for p in validation_problems(err)]
        ) from None
    _check_counts(parsed, limits)
    pod = _decoded(parsed.pod, "pod", Pod) if parsed.pod is not None else None
    claims = [_decoded(c, f"claims[{i}]", ResourceClaim) for i, c in enumerate(parsed.claims)]
    templates = [
        _decoded(t, f"claimTemplates[{i}]", ResourceClaimTemplate)
        for i, t in enumerate(parsed.claim_templates)
    ]
    first = pod or next(iter([*claims, *templates]))
    namespace = first.namespace or DEFAULT_NAMESPACE
    claims = [apply_defaults(_in_namespace(c, namespace, f"claims[{i}]"), now) for i, c in enumerate(claims)]
    templates = [
        apply_defaults(_in_namespace(t, namespace, f"claimTemplates[{i}]"), now)
        for i, t in enumerate(templates)
    ]
    problems = [
        f"claims[{i}].status: Forbidden: a dry run allocates its claims; refer to an allocated "
        "claim by name from the pod instead"
        for i, c in enumerate(claims)
        if c.status is not None
    ]
    if problems:
        raise RequestError(problems)
    if pod is None:
        pod = _synthetic(namespace, claims, templates)
    else:
        pod = apply_defaults(_in_namespace(pod, namespace, "pod"), now)
    return HttpQuestion(
        pod=with_uid(pod),
        claims=tuple(claims),
        templates=tuple(templates),
        nodes=tuple(parsed.nodes) if parsed.nodes is not None else None,
        limit=parsed.limit or limits.default_limit,
        synthetic=parsed.pod is None,
        headroom=parsed.headroom,
        max=parsed.max,
    )


def _synthetic(
    namespace: str, claims: Sequence[ResourceClaim], templates: Sequence[ResourceClaimTemplate]
) -> Pod:
    """The pod a claims-only request stands for: no containers, one reference per claim and template."""
    refs = [PodResourceClaim(name=c.name, resource_claim_name=c.name) for c in claims]
    refs += [PodResourceClaim(name=t.name, resource_claim_template_name=t.name) for t in templates]
    return Pod(
        apiVersion="v1",
        kind="Pod",
        metadata=ObjectMeta(name=SYNTHETIC_POD, namespace=namespace),
        spec=PodSpec(resourceClaims=refs),
    )


def _with_objects(snapshot: Snapshot, question: HttpQuestion) -> Snapshot:
    """The snapshot plus the request's claims and templates; a name the cluster already has is refused."""
    taken = [
        f"claims[{i}]: resource claim {c.key} already exists in the cluster; give the dry-run claim another "
        "name, or refer to the existing one from the pod"
        for i, c in enumerate(question.claims)
        if (c.namespace, c.name) in snapshot.claims
    ]
    taken += [
        f"claimTemplates[{i}]: resource claim template {t.key} already exists in the cluster; give the "
        "dry-run template another name"
        for i, t in enumerate(question.templates)
        if (t.namespace, t.name) in snapshot.templates
    ]
    if taken:
        raise UnanswerableError(taken[0], taken)
    if not question.claims and not question.templates:
        return snapshot
    return replace(
        snapshot.with_claims_and_pods(question.claims, []),
        templates=MappingProxyType(
            {**snapshot.templates, **{(t.namespace, t.name): t for t in question.templates}}
        ),
    )


def _admitted(question: HttpQuestion, snapshot: Snapshot) -> HttpQuestion:
    """The question with its pod's priority resolved from the cluster's PriorityClasses, as the
    API server's Priority admission plugin resolves it before the pod is validated."""
    try:
        pod = Priorities.of(snapshot.priority_classes.values()).admit(question.pod)
    except PriorityRefused as err:
        raise UnanswerableError(f"{REFUSED}: pod: {err}", [f"pod: {err}"]) from None
    return replace(question, pod=pod)


def _validated(question: HttpQuestion, snapshot: Snapshot) -> None:
    """The API server's validation of the request's objects: a dry run of what it would refuse is moot."""
    labels = snapshot.namespace_labels(question.pod.namespace)
    named: list[tuple[str, TypedObject]] = [(f"claims[{i}]", c) for i, c in enumerate(question.claims)]
    named += [(f"claimTemplates[{i}]", t) for i, t in enumerate(question.templates)]
    if not question.synthetic:
        named.append(("pod", question.pod))
    problems = [
        f"{where}: {line}" for where, obj in named for line in render(validate(obj, namespace_labels=labels))
    ]
    if problems:
        raise UnanswerableError(f"{REFUSED}: {problems[0]}", problems)


def _known_nodes(question: HttpQuestion, snapshot: Snapshot) -> None:
    unknown = [n for n in question.nodes or () if n not in snapshot.nodes]
    if unknown:
        raise UnanswerableError(
            f"nodes: Not found: {', '.join(map(repr, unknown))}: no such Node in the cluster",
            [f"nodes: Not found: {n!r}" for n in unknown],
        )


def _checked(question: HttpQuestion, prepared: Prepared) -> tuple[HttpQuestion, Snapshot]:
    """The question with its pod admitted, and the snapshot with its objects; raises
    UnanswerableError for objects the API server would refuse, names the cluster already has and
    unknown nodes."""
    snapshot = prepared.snapshot
    question = _admitted(question, snapshot)
    _validated(question, snapshot)
    extended = _with_objects(snapshot, question)
    _known_nodes(question, snapshot)
    return question, extended


def answer_request(
    question: HttpQuestion, prepared: Prepared, *, budget: SearchBudget, pace: Pace
) -> PodAnswer:
    """The answer to ``question`` on the prepared snapshot, ``question.limit`` nodes listed; raises
    UnanswerableError (see :func:`_checked`) and for missing claims or templates."""
    question, extended = _checked(question, prepared)
    dry = DryRun(prepared, snapshot=extended, budget=budget, pace=pace)
    try:
        outcome = dry.outcome(Question(question.pod), question.nodes, listed=question.limit)
    except ClaimNotFoundError as err:
        raise UnanswerableError(str(err), [str(err)]) from None
    return to_answer(outcome, question.limit)


def headroom_request(
    question: HttpQuestion, prepared: Prepared, *, budget: SearchBudget, pace: Pace
) -> Headroom:
    """Copies of the question's pod placed until one does not fit, ``question.max`` are placed or
    ``pace`` runs out; raises UnanswerableError as :func:`answer_request`. The request's claims and
    templates are not allocated, so the prepared allocator and cluster serve as they are."""
    question, extended = _checked(question, prepared)
    ready = prepared if extended is prepared.snapshot else replace(prepared, snapshot=extended)
    try:
        return headroom(ready, question.pod, limit=question.max, budget=budget, pace=pace)
    except ClaimNotFoundError as err:
        raise UnanswerableError(str(err), [str(err)]) from None
