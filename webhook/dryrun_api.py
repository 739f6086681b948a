"""``POST /v1/dryrun``: would this pod (or these claims) fit, where, with which devices, at what cost.

The HTTP face of :mod:`policies.dryrun`, answered against the live snapshot, off the admission path.
``draguard serve`` mounts it with :func:`add_dryrun_routes`; ``GET /v1/openapi.json`` describes it.

Request (JSON): ``{"pod": POD}`` or ``{"claims": [...], "claimTemplates": [...]}`` (both may be
combined: the claims and templates a pod refers to, before they exist), plus ``"nodes": [names]``
to ask only those nodes and ``"limit": N`` to cap how many node answers come back. Without a pod,
the claims and templates are asked as one pod using all of them would be: a pod named ``dryrun`` in
their namespace referring to each claim by name and each template, in request order.

Answer: per node, the ``draguard allocate -o json`` entry (``node``, ``allocated``, ``results``,
``error``, ``explanation``) plus ``reason``; a node that fits also gets ``rank``, ``stranded``,
``footprint`` (node-allocatable resources the devices yield for the pod, KEP-5517) and ``quota``
(what draguard's quota rule would charge the namespace, and the first quota it would exceed).
Fitting nodes come first, best first; then the others by name. ``checked``/``total`` say how many
nodes were asked, ``complete`` whether all of them were, ``elapsedMs`` how long it took.

**Stranded** devices: the devices of the node's own pools (slices with ``nodeName``) that would
still be free after this allocation. Fewer is better packing: the pod fills a node that is already
partly used instead of breaking into an empty one, which keeps whole nodes free for large pods.
Devices of pools shared by several nodes are left out, as they are not "on" one node.

Bounds: callers authenticate (:mod:`webhook.auth`) and are rate-limited per caller (429 with
Retry-After); the body, the number of claims and of nodes are capped (413/400); the search has a
budget per node (steps and seconds, like the scheduler's filter timeout) and the request a total
deadline: past it the answer is partial (``complete: false``), or 503 if no node was checked.
The allocator is synchronous, so requests run on one worker thread of their own, never the
admission pool's, and at most ``queue`` wait for it (503 beyond).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from policies.allocator import AllocatedState, Allocator, Features, SearchBudget
from policies.api.base import ObjectMeta, TypedObject
from policies.api.core import Node, Pod, PodResourceClaim, PodSpec, ResourceQuota
from policies.api.defaults import apply_defaults
from policies.api.kinds import DecodeError, decode, validation_problems
from policies.api.quantity import Quantity
from policies.api.resource import Device, ResourceClaim, ResourceClaimTemplate
from policies.cel import Environment, SelectorCache
from policies.dryrun import DryRun, DryRunInputError, NodeAnswer, pod_claims, snapshot_allocator
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
from policies.quota import Ledger, claim_object_usage, first_exceeded, pod_charge
from policies.rules.quota import folded_quotas, snapshot_ledger
from policies.snapshot import Snapshot
from policies.validation import render, validate
from webhook.auth import (
    Authenticator,
    AuthError,
    BearerTokens,
    Chain,
    ClientCertificates,
    Open,
    RateLimiter,
    SubjectAccessReviews,
    kube_access_reviewer,
    kube_token_reviewer,
)

log = logging.getLogger("draguard.dryrun")

DRYRUN_PATH = "/v1/dryrun"
OPENAPI_PATH = "/v1/openapi.json"
SYNTHETIC_POD = "dryrun"
DEFAULT_NAMESPACE = "default"

T = TypeVar("T", bound=TypedObject)

SnapshotProvider = Callable[[], Snapshot | None]
"""The live snapshot, or None while the cluster state is not synced yet (answered 503)."""


# --- settings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DryRunSettings:
    """The endpoint's bounds and authentication; every field has a ``--dryrun-*`` flag."""

    demo: bool = False
    client_ca_file: str | None = None
    token_audiences: tuple[str, ...] = ()
    rate: float = 2.0
    burst: int = 5
    max_body_bytes: int = 1 << 20
    max_claims: int = 32
    max_nodes: int = 5000
    default_limit: int = 20
    timeout: float = 5.0
    node_timeout: float = 1.0
    node_max_steps: int = 100_000
    queue: int = 4
    features: Features = field(default_factory=Features)


class SettingsError(ValueError):
    """A ``--dryrun-*`` flag value that cannot work; the message names the flag."""


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The ``--dryrun-*`` flags of ``draguard serve`` (``--demo`` is serve's own)."""
    d = DryRunSettings()
    g = parser.add_argument_group("dry-run endpoint (POST /v1/dryrun)")
    g.add_argument(
        "--dryrun-client-ca", metavar="FILE", help="accept client certificates issued by this CA bundle"
    )
    g.add_argument(
        "--dryrun-token-audience",
        action="append",
        default=[],
        metavar="AUD",
        help="bearer tokens must be valid for this audience (repeatable; default: the API server's)",
    )
    g.add_argument(
        "--dryrun-rate",
        type=float,
        default=d.rate,
        metavar="PER_SECOND",
        help="requests per second per caller (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-burst",
        type=int,
        default=d.burst,
        metavar="N",
        help="requests a caller may make at once (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-max-body",
        type=int,
        default=d.max_body_bytes,
        metavar="BYTES",
        help="largest request body (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-max-claims",
        type=int,
        default=d.max_claims,
        metavar="N",
        help="most claims, and most claim templates, in one request (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-max-nodes",
        type=int,
        default=d.max_nodes,
        metavar="N",
        help="most node names in one request, and the largest limit (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-default-limit",
        type=int,
        default=d.default_limit,
        metavar="N",
        help="node answers returned when the request gives no limit (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-timeout",
        type=float,
        default=d.timeout,
        metavar="SECONDS",
        help="total time for one request; later nodes are left out (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-node-timeout",
        type=float,
        default=d.node_timeout,
        metavar="SECONDS",
        help="time for one node's search, like the scheduler's filter timeout (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-max-steps",
        type=int,
        default=d.node_max_steps,
        metavar="N",
        help="search steps for one node (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-queue",
        type=int,
        default=d.queue,
        metavar="N",
        help="requests that may wait for the dry-run worker; more are answered 503 (default %(default)s)",
    )
    g.add_argument(
        "--dryrun-features",
        default=None,
        metavar="LIST",
        help="allocator features, as for draguard allocate (default: the Kubernetes 1.36 defaults)",
    )


def settings_from_args(args: argparse.Namespace, demo: bool) -> DryRunSettings:
    """The settings the flags give; ``demo`` (serve's ``--demo``) turns authentication off."""
    positive = {
        "--dryrun-rate": args.dryrun_rate,
        "--dryrun-burst": args.dryrun_burst,
        "--dryrun-max-body": args.dryrun_max_body,
        "--dryrun-max-claims": args.dryrun_max_claims,
        "--dryrun-max-nodes": args.dryrun_max_nodes,
        "--dryrun-default-limit": args.dryrun_default_limit,
        "--dryrun-timeout": args.dryrun_timeout,
        "--dryrun-node-timeout": args.dryrun_node_timeout,
        "--dryrun-max-steps": args.dryrun_max_steps,
    }
    for flag, value in positive.items():
        if not value > 0:
            raise SettingsError(f"{flag}: must be greater than 0, got {value}")
    if args.dryrun_queue < 0:
        raise SettingsError(f"--dryrun-queue: must be 0 or more, got {args.dryrun_queue}")
    if args.dryrun_default_limit > args.dryrun_max_nodes:
        raise SettingsError(
            f"--dryrun-default-limit: must not exceed --dryrun-max-nodes ({args.dryrun_max_nodes}), "
            f"got {args.dryrun_default_limit}"
        )
    try:
        features = Features() if args.dryrun_features is None else Features.parse(args.dryrun_features)
    except ValueError as err:
        raise SettingsError(f"--dryrun-features: {err}") from None
    if args.dryrun_client_ca is not None:
        _check_ca_bundle(args.dryrun_client_ca)
    return DryRunSettings(
        demo=demo,
        client_ca_file=args.dryrun_client_ca,
        token_audiences=tuple(args.dryrun_token_audience),
        rate=args.dryrun_rate,
        burst=args.dryrun_burst,
        max_body_bytes=args.dryrun_max_body,
        max_claims=args.dryrun_max_claims,
        max_nodes=args.dryrun_max_nodes,
        default_limit=args.dryrun_default_limit,
        timeout=args.dryrun_timeout,
        node_timeout=args.dryrun_node_timeout,
        node_max_steps=args.dryrun_max_steps,
        queue=args.dryrun_queue,
        features=features,
    )


def _check_ca_bundle(path: str) -> None:
    """Refuse at start-up a CA bundle the handshake or the authenticator could not read."""
    try:
        ClientCertificates.from_file(path)
    except OSError as err:
        raise SettingsError(f"--dryrun-client-ca {path}: cannot read: {err.strerror}") from None
    except ValueError as err:
        raise SettingsError(f"--dryrun-client-ca {path}: not a PEM certificate bundle: {err}") from None


# --- the question -----------------------------------------------------------------------------------


class Problem(Exception):
    """A request that cannot be answered: ``status`` and one line per problem, naming the field."""

    def __init__(
        self, status: int, summary: str, problems: Sequence[str] = (), retry_after: float = 0
    ) -> None:
        super().__init__(summary)
        self.status = status
        self.problems = tuple(problems)
        self.retry_after = retry_after

    def payload(self) -> dict[str, Any]:
        return {"error": str(self), "problems": list(self.problems)}


def bad_request(problems: Sequence[str]) -> Problem:
    summary = problems[0] if len(problems) == 1 else f"{problems[0]} (and {len(problems) - 1} more problems)"
    return Problem(400, f"invalid dry-run request: {summary}", problems)


class DryRunBody(BaseModel):
    """The request body's shape; the objects inside are decoded as API objects afterwards."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", strict=True, frozen=True)

    pod: dict[str, Any] | None = None
    claims: list[dict[str, Any]] = Field(default_factory=list)
    claim_templates: list[dict[str, Any]] = Field(default_factory=list)
    nodes: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)


@dataclass(frozen=True)
class Question:
    """A decoded, defaulted request: the pod to place (possibly the synthetic one) and its objects."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]
    templates: tuple[ResourceClaimTemplate, ...]
    nodes: tuple[str, ...] | None
    limit: int
    synthetic: bool


def _decoded(raw: Any, where: str, kind: type[T]) -> T:
    try:
        obj = decode(raw)
    except DecodeError as err:
        raise bad_request(
            [p.replace("<root>", where) if p.startswith("<root>") else f"{where}.{p}" for p in err.problems]
        ) from None
    if not isinstance(obj, kind):
        raise bad_request([f"{where}.kind: Invalid value: {obj.kind!r}: must be {kind.__name__}"])
    return obj


def _in_namespace(obj: T, namespace: str, where: str) -> T:
    """The object with ``namespace`` filled in when it has none (kubectl's default), else checked."""
    if obj.namespace and obj.namespace != namespace:
        raise bad_request(
            [
                f"{where}.metadata.namespace: Invalid value: {obj.namespace!r}: "
                f"must be {namespace!r}, the namespace of the pod (or of the first object)"
            ]
        )
    if obj.namespace:
        return obj
    return obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"namespace": namespace})})


def _check_counts(body: DryRunBody, settings: DryRunSettings) -> None:
    problems = [
        f"{name}: Too many: {len(items)}: must have at most {cap} items"
        for name, items, cap in (
            ("claims", body.claims, settings.max_claims),
            ("claimTemplates", body.claim_templates, settings.max_claims),
            ("nodes", body.nodes or [], settings.max_nodes),
        )
        if len(items) > cap
    ]
    if body.limit is not None and body.limit > settings.max_nodes:
        problems.append(f"limit: Invalid value: {body.limit}: must be at most {settings.max_nodes}")
    duplicates = sorted({n for n in body.nodes or [] if (body.nodes or []).count(n) > 1})
    problems += [f"nodes: Duplicate value: {n!r}" for n in duplicates]
    if body.pod is None and not body.claims and not body.claim_templates:
        problems.append("pod: Required value: give a pod, or claims and/or claimTemplates to allocate")
    if problems:
        raise bad_request(problems)


def parse_question(body: bytes, settings: DryRunSettings, now: datetime) -> Question:
    """The request as a Question; raises Problem(400) naming the field for anything malformed."""
    try:
        raw = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise bad_request([f"body: Invalid value: not JSON: {err}"]) from None
    if not isinstance(raw, dict):
        raise bad_request(
            ["body: Invalid value: must be a JSON object with pod, claims, claimTemplates, nodes or limit"]
        )
    try:
        parsed = DryRunBody.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as err:
        raise bad_request(
            [
                p.replace(
                    "Extra inputs are not permitted",
                    "unknown field (known: pod, claims, claimTemplates, nodes, limit)",
                )
                for p in validation_problems(err)
            ]
        ) from None
    _check_counts(parsed, settings)
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
    if pod is not None and not pod.spec.resource_claims:
        problems.append("pod.spec.resourceClaims: Required value: the pod refers to no ResourceClaim")
    if problems:
        raise bad_request(problems)
    pod = (
        _in_namespace(pod, namespace, "pod")
        if pod is not None
        else synthetic_pod(namespace, claims, templates)
    )
    return Question(
        pod=pod,
        claims=tuple(claims),
        templates=tuple(templates),
        nodes=tuple(parsed.nodes) if parsed.nodes is not None else None,
        limit=parsed.limit or settings.default_limit,
        synthetic=parsed.pod is None,
    )


def synthetic_pod(
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


# --- time -------------------------------------------------------------------------------------------


class Deadlines:
    """The request's total deadline and the per-node one, read by the search through one clock.

    ``search_clock`` returns the node's elapsed time, or more once the total deadline is nearer, so a
    ``SearchBudget(deadline=node_timeout)`` stops at whichever comes first.
    """

    def __init__(self, clock: Callable[[], float], total: float, per_node: float) -> None:
        self._clock = clock
        self.started = clock()
        self.total = total
        self.per_node = per_node
        self._node_started = self.started
        self._cancelled = False

    def begin_node(self) -> None:
        self._node_started = self._clock()

    def cancel(self) -> None:
        """Stop at the next clock reading (the caller went away)."""
        self._cancelled = True

    def search_clock(self) -> float:
        if self._cancelled:
            return math.inf
        now = self._clock()
        return max(now - self._node_started, now - self.started - self.total + self.per_node)

    def over(self) -> bool:
        return self._cancelled or self._clock() - self.started >= self.total

    def elapsed_ms(self) -> float:
        return round((self._clock() - self.started) * 1000, 3)

    def budget(self, max_steps: int) -> SearchBudget:
        return SearchBudget(max_invocations=max_steps, deadline=self.per_node, clock=self.search_clock)


# --- the answer -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """What every request on one snapshot reuses: devices by key, the free devices of each node, and
    the snapshot's allocator, which each request forks (see :func:`policies.dryrun.snapshot_allocator`).

    The allocator carries what it learns (digested devices, selector verdicts, pools per node) from
    one request to the next: rebuilding it per request cost 8x the dry run itself at 5,000 nodes
    (``benchmarks/dryrun.py``). Only the dry-run worker thread uses it.
    """

    devices: Mapping[DeviceKey, Device]
    free: Mapping[str, frozenset[DeviceKey]]
    allocator: Allocator
    yielding: frozenset[DeviceKey] = frozenset()
    """The devices that yield node-allocatable resources (the others add nothing to a footprint)."""

    @classmethod
    def of(cls, snapshot: Snapshot, features: Features, cel_cache: SelectorCache | None = None) -> Prepared:
        devices = snapshot.devices
        node_of = {
            (s.spec.driver, s.spec.pool.name): s.spec.node_name for s in snapshot.slices if s.spec.node_name
        }
        state = AllocatedState.from_claims(snapshot.allocated_claims(), features)
        taken = {(d.driver, d.pool, d.device) for d in state.allocated_devices}
        free: dict[str, set[DeviceKey]] = {}
        for key in devices:
            node = node_of.get(key[:2])
            if node and key not in taken:
                free.setdefault(node, set()).add(key)
        return cls(
            devices,
            MappingProxyType({n: frozenset(keys) for n, keys in free.items()}),
            snapshot_allocator(snapshot, features, state=state, cel_cache=cel_cache),
            frozenset(k for k, d in devices.items() if yields_node_resources(d)),
        )


def _quantities(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(resources.items())}


_CostKey = tuple[tuple[DeviceKey, ...], ...]


@dataclass(frozen=True)
class Costs:
    """How a fitting node's answer is priced: footprint and quota charge of the pod's claims.

    The price depends on the answer only through the devices that yield node resources, so answers
    that pick none of those, or the same ones, share one computed price (the returned dicts are
    shared between entries: not to be changed). An answer consuming capacity of such a device is
    priced on its own (quantities equal in value may print differently).
    """

    pod: Pod
    references: tuple[tuple[str, ...], ...]
    created_usage: Mapping[str, Quantity]
    quotas: tuple[ResourceQuota, ...]
    ledger_usage: Mapping[str, Quantity]
    devices: Mapping[DeviceKey, Device]
    yielding: frozenset[DeviceKey] = frozenset()
    _priced: dict[_CostKey, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def of(self, answer: NodeAnswer) -> dict[str, Any]:
        key = self._key(answer)
        if key is None:
            return self._price(answer)
        price = self._priced.get(key)
        if price is None:
            price = self._priced[key] = self._price(answer)
        return price

    def _key(self, answer: NodeAnswer) -> _CostKey | None:
        """Per claim, the devices claim_footprint counts that yield anything, in order (the others
        add an empty footprint); None when one of those has consumedCapacity."""
        key = []
        for result in answer.results:
            counted: list[DeviceKey] = []
            for r in (result.devices.results or ()) if result is not None and result.devices else ():
                device = (r.driver, r.pool, r.device)
                if r.admin_access or device not in self.yielding:
                    continue
                if r.consumed_capacity is not None:
                    return None
                counted.append(device)
            key.append(tuple(counted))
        return tuple(key)

    def _price(self, answer: NodeAnswer) -> dict[str, Any]:
        try:
            uses = [
                ClaimUse(claim_footprint(r, self.devices), n)
                for r, n in zip(answer.results, self.references, strict=True)
            ]
        except FootprintError as err:
            return {"footprintError": str(err)}
        charge = add_lists(pod_charge(self.pod, uses), self.created_usage)
        exceeded = first_exceeded(self.quotas, charge, self.ledger_usage)
        return {
            "footprint": _quantities(dra_resources(uses)),
            "quota": {"charge": _quantities(charge), "exceeded": exceeded.message() if exceeded else None},
        }


def _costs(
    question: Question, snapshot: Snapshot, claims: Sequence[ResourceClaim], prepared: Prepared
) -> Costs:
    pod, namespace = question.pod, question.pod.namespace
    created = [c for c in claims if (c.namespace, c.name) not in snapshot.claims]
    quotas = tuple(folded_quotas(snapshot, namespace))
    ledger = snapshot_ledger(snapshot, namespace) if quotas else Ledger()
    return Costs(
        pod=pod,
        references=tuple(
            referencing_containers(pod, ref.name) for ref in pod.spec.resource_claims or ()
        ),
        created_usage=add_lists(*(claim_object_usage(c.spec.devices, snapshot.classes) for c in created)),
        quotas=quotas,
        ledger_usage=ledger.usage(namespace),
        devices=prepared.devices,
        yielding=prepared.yielding,
    )


def _stranded(answer: NodeAnswer, free: frozenset[DeviceKey]) -> int:
    chosen = {
        (r.driver, r.pool, r.device)
        for result in answer.results
        if result is not None and result.devices is not None
        for r in result.devices.results or ()
        if not r.admin_access
    }
    return len(free - chosen)


def _with_objects(snapshot: Snapshot, question: Question) -> Snapshot:
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
        raise Problem(422, taken[0], taken)
    if not question.claims and not question.templates:
        return snapshot
    return replace(
        snapshot,
        claims=MappingProxyType({**snapshot.claims, **{(c.namespace, c.name): c for c in question.claims}}),
        templates=MappingProxyType(
            {**snapshot.templates, **{(t.namespace, t.name): t for t in question.templates}}
        ),
    )


def _validated(question: Question, snapshot: Snapshot) -> None:
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
        raise Problem(422, f"the API server would refuse these objects: {problems[0]}", problems)


def _nodes(question: Question, snapshot: Snapshot) -> list[Node]:
    if question.nodes is None:
        return list(snapshot.nodes.values())
    unknown = [n for n in question.nodes if n not in snapshot.nodes]
    if unknown:
        raise Problem(
            422,
            f"nodes: Not found: {', '.join(map(repr, unknown))}: no such Node in the cluster",
            [f"nodes: Not found: {n!r}" for n in unknown],
        )
    return [snapshot.nodes[n] for n in question.nodes]


def answer(
    question: Question, snapshot: Snapshot, prepared: Prepared, settings: DryRunSettings, deadlines: Deadlines
) -> dict[str, Any]:
    """The dry run of ``question`` on ``snapshot`` as the response document; raises Problem."""
    _validated(question, snapshot)
    extended = _with_objects(snapshot, question)
    try:
        claims = pod_claims(extended, question.pod)
    except DryRunInputError as err:
        raise Problem(422, str(err), [str(err)]) from None
    nodes = _nodes(question, snapshot)
    costs = _costs(question, snapshot, claims, prepared)
    # The request adds only unallocated claims and templates (parse_question refuses a status), so
    # the allocator prepared for ``snapshot`` has exactly the inputs ``extended`` would give it.
    dry = DryRun(
        extended,
        claims,
        settings.features,
        pod=question.pod,
        budget=deadlines.budget(settings.node_max_steps),
        allocator=prepared.allocator,
    )
    listed = _Listed(question.limit, prepared.free)
    for node in nodes:
        if deadlines.over():
            break
        deadlines.begin_node()
        node_answer = dry.on_node(node)
        if deadlines.over() and node_answer.error is not None:
            break  # the total deadline cut this node's search short: no answer for it
        listed.add(node_answer)
    if not listed.checked and nodes:
        raise Problem(
            503,
            f"no node could be checked within the {settings.timeout:g}s dry-run deadline",
            retry_after=settings.timeout,
        )
    return _document(claims, listed, len(nodes), costs, deadlines)


class _Listed:
    """The answers a document lists, kept as they come: the ``limit`` best fitting ones (fewest
    stranded devices, then node name) and the ``limit`` first others by node name; counts of all.

    Any other answer is dropped at once. Holding every answer of a whole-cluster question to the end
    kept enough objects alive per request to set off a full garbage collection, over the snapshot's
    million objects, every other request (``benchmarks/dryrun.py``).
    """

    def __init__(self, limit: int, free: Mapping[str, frozenset[DeviceKey]]) -> None:
        self.limit = limit
        self._free = free
        self.checked = 0
        self.fitting = 0
        self._best: list[tuple[int, NodeAnswer]] = []
        self._others: list[NodeAnswer] = []

    def add(self, answer: NodeAnswer) -> None:
        self.checked += 1
        if answer.allocated:
            self.fitting += 1
            self._best.append((_stranded(answer, self._free.get(answer.node, frozenset())), answer))
            if len(self._best) >= 2 * self.limit:
                self._best = self.best()
        else:
            self._others.append(answer)
            if len(self._others) >= 2 * self.limit:
                self._others = self.others()

    def best(self) -> list[tuple[int, NodeAnswer]]:
        """The fitting answers listed, best first, with their stranded devices."""
        return sorted(self._best, key=lambda pair: (pair[0], pair[1].node))[: self.limit]

    def others(self) -> list[NodeAnswer]:
        """The first answers that do not fit, by node name (listed after the best, up to the limit)."""
        return sorted(self._others, key=lambda a: a.node)[: self.limit]


def _document(
    claims: Sequence[ResourceClaim], listed: _Listed, total: int, costs: Costs, deadlines: Deadlines
) -> dict[str, Any]:
    entries = [
        {**a.to_json(), "reason": a.reason, "rank": i, "stranded": stranded, **costs.of(a)}
        for i, (stranded, a) in enumerate(listed.best(), start=1)
    ]
    entries += [{**a.to_json(), "reason": a.reason} for a in listed.others()[: listed.limit - len(entries)]]
    return {
        "claims": [c.key for c in claims],
        "nodes": entries,
        "checked": listed.checked,
        "total": total,
        "fitting": listed.fitting,
        "complete": listed.checked == total,
        "elapsedMs": deadlines.elapsed_ms(),
    }


# --- HTTP -------------------------------------------------------------------------------------------


def _json(
    status: int, payload: Any, retry_after: float = 0, headers: Mapping[str, str] | None = None
) -> web.Response:
    extra = dict(headers or {})
    if retry_after > 0:
        extra["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return web.Response(
        status=status, body=json.dumps(payload).encode(), content_type="application/json", headers=extra
    )


async def read_capped(request: web.Request, limit: int) -> bytes:
    """The body, refusing (413) one over ``limit`` bytes without reading all of it."""
    too_large = Problem(
        413, f"request body is larger than the dry-run limit of {limit} bytes (--dryrun-max-body)"
    )
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(65536):
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


class DryRunEndpoint:
    """The two routes' handlers; one per server (see :func:`add_dryrun_routes`)."""

    def __init__(
        self,
        snapshots: SnapshotProvider,
        settings: DryRunSettings,
        authenticator: Chain,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self._snapshots = snapshots
        self._auth = authenticator
        self._limiter = RateLimiter(settings.rate, settings.burst, clock)
        self._clock = clock
        self._wall_clock = wall_clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="draguard-dryrun")
        self._waiting = 0
        self._prepared: tuple[Snapshot, Prepared] | None = None
        # Device bindings and selector results, carried from one snapshot's allocator to the next
        # (by slice generation): a new snapshot costs its first request the changed devices only.
        self._cel_cache = SelectorCache(
            Environment("stored", list_type_attributes=settings.features.list_type_attributes)
        )
        self._openapi = json.dumps(openapi_document(settings)).encode()

    async def dryrun(self, request: web.Request) -> web.Response:
        caller = "-"
        try:
            try:
                who = await self._auth.authenticate(request)
            except AuthError as err:
                headers = {"WWW-Authenticate": 'Bearer realm="draguard dry-run"'} if err.status == 401 else {}
                return self._log(
                    _json(
                        err.status,
                        {"error": str(err), "problems": []},
                        1 if err.status == 503 else 0,
                        headers,
                    ),
                    caller,
                )
            caller = who.name
            wait = self._limiter.take(who.name)
            if wait > 0:
                raise Problem(
                    429,
                    f"rate limit: {self.settings.rate:g} dry runs per second per caller "
                    f"(bursts of {self.settings.burst})",
                    retry_after=wait,
                )
            return self._log(await self._answer(request), caller)
        except Problem as problem:
            return self._log(_json(problem.status, problem.payload(), problem.retry_after), caller)

    async def _answer(self, request: web.Request) -> web.Response:
        started = Deadlines(self._clock, self.settings.timeout, self.settings.node_timeout)
        content_type = request.headers.get("Content-Type", "application/json")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise Problem(415, f"Content-Type: must be application/json, got {content_type!r}")
        body = await read_capped(request, self.settings.max_body_bytes)
        question = parse_question(body, self.settings, self._wall_clock())
        snapshot = self._snapshots()
        if snapshot is None:
            raise Problem(503, "the cluster state is not synced yet", retry_after=1)
        if self._waiting >= self.settings.queue + 1:
            raise Problem(
                503,
                f"busy: {self._waiting} dry runs are running or waiting",
                retry_after=self.settings.timeout,
            )
        self._waiting += 1
        try:
            loop = asyncio.get_running_loop()
            encoded = await loop.run_in_executor(self._executor, self._work, question, snapshot, started)
        except asyncio.CancelledError:
            started.cancel()
            raise
        finally:
            self._waiting -= 1
        return web.Response(body=encoded, content_type="application/json")

    def _work(self, question: Question, snapshot: Snapshot, deadlines: Deadlines) -> bytes:
        """On the worker thread: prepare the snapshot once, answer, encode (big answers are not cheap)."""
        if self._prepared is None or self._prepared[0] is not snapshot:
            self._prepared = (snapshot, Prepared.of(snapshot, self.settings.features, self._cel_cache))
        document = answer(question, snapshot, self._prepared[1], self.settings, deadlines)
        return json.dumps(document).encode()

    async def openapi(self, _: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    def _log(self, response: web.Response, caller: str) -> web.Response:
        log.info("dry run", extra={"fields": {"caller": caller, "status": response.status}})
        return response

    async def close(self, _: web.Application | None = None) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def authenticator_for(settings: DryRunSettings, api_client: object | None) -> Chain:
    """Open with ``demo``; otherwise client certificates (with a CA) and TokenReview (with a cluster),
    and with a cluster every caller authorized by SubjectAccessReview (see :mod:`webhook.auth`)."""
    if settings.demo:
        return Chain([Open()])
    methods: list[Authenticator] = []
    if settings.client_ca_file:
        methods.append(ClientCertificates.from_file(settings.client_ca_file))
    if api_client is not None:
        methods.append(BearerTokens(kube_token_reviewer(api_client, settings.token_audiences)))
    if not methods:
        log.warning(
            "the dry-run endpoint accepts nobody: give --dryrun-client-ca, serve a cluster, or --demo"
        )
    authorizer = SubjectAccessReviews(kube_access_reviewer(api_client)) if api_client is not None else None
    return Chain(methods, authorizer)


def add_dryrun_routes(
    app: web.Application,
    snapshots: SnapshotProvider,
    settings: DryRunSettings,
    *,
    api_client: object | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> DryRunEndpoint:
    """Mount ``POST /v1/dryrun`` and ``GET /v1/openapi.json`` on ``app`` (the HTTPS serve app).

    ``api_client`` (a ``kubernetes`` ApiClient) enables bearer tokens through TokenReview;
    ``clock`` (seconds, monotonic) times the deadlines and the rate limit. The worker thread stops
    with the app (``on_cleanup``).
    """
    endpoint = DryRunEndpoint(snapshots, settings, authenticator_for(settings, api_client), clock)
    app.router.add_post(DRYRUN_PATH, endpoint.dryrun)
    app.router.add_get(OPENAPI_PATH, endpoint.openapi)
    app.on_cleanup.append(endpoint.close)
    return endpoint


# --- OpenAPI ----------------------------------------------------------------------------------------


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _schemas(settings: DryRunSettings) -> dict[str, Any]:
    ref = "#/components/schemas/"
    api_object = {
        "type": "object",
        "description": "a Kubernetes object as JSON (apiVersion, kind, metadata, spec)",
    }
    resources = {"type": "object", "additionalProperties": {"type": "string", "description": "a quantity"}}
    return {
        "DryRunRequest": {
            "type": "object",
            "additionalProperties": False,
            "anyOf": [{"required": ["pod"]}, {"required": ["claims"]}, {"required": ["claimTemplates"]}],
            "properties": {
                "pod": {**api_object, "description": "a v1 Pod that refers to claims (spec.resourceClaims)"},
                "claims": {
                    "type": "array",
                    "maxItems": settings.max_claims,
                    "items": {**api_object, "description": "a resource.k8s.io/v1 ResourceClaim, unallocated"},
                },
                "claimTemplates": {
                    "type": "array",
                    "maxItems": settings.max_claims,
                    "items": {**api_object, "description": "a resource.k8s.io/v1 ResourceClaimTemplate"},
                },
                "nodes": {
                    "type": "array",
                    "maxItems": settings.max_nodes,
                    "uniqueItems": True,
                    "items": {"type": "string"},
                    "description": "ask only these nodes (default: all)",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": settings.max_nodes,
                    "description": f"node answers to return (default {settings.default_limit})",
                },
            },
        },
        "DeviceResult": {
            "type": "object",
            "required": ["request", "driver", "pool", "device"],
            "properties": {k: {"type": "string"} for k in ("request", "driver", "pool", "device")},
        },
        "AllocationResult": {
            "type": "object",
            "description": "resource.k8s.io/v1 AllocationResult, printed as the API server stores it",
            "required": ["devices"],
            "properties": {
                "devices": {
                    "type": "object",
                    "properties": {
                        "results": {"type": "array", "items": {"$ref": ref + "DeviceResult"}},
                        "config": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "nodeSelector": {"type": "object"},
            },
        },
        "ResourceList": resources,
        "NodeAnswer": {
            "type": "object",
            "required": ["node", "allocated", "results", "error", "explanation", "reason"],
            "properties": {
                "node": {"type": "string"},
                "allocated": {"type": "boolean"},
                "results": {
                    "type": "array",
                    "items": _nullable({"$ref": ref + "AllocationResult"}),
                    "description": "one per claim, in the order of the answer's claims",
                },
                "error": _nullable({"type": "string"}),
                "explanation": _nullable({"type": "object"}),
                "reason": _nullable({"type": "string"}),
                "rank": {"type": "integer", "minimum": 1, "description": "fitting nodes only; 1 is best"},
                "stranded": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "devices of the node's own pools still free after this allocation",
                },
                "footprint": {"$ref": ref + "ResourceList"},
                "footprintError": {"type": "string"},
                "quota": {
                    "type": "object",
                    "required": ["charge", "exceeded"],
                    "properties": {
                        "charge": {"$ref": ref + "ResourceList"},
                        "exceeded": _nullable({"type": "string"}),
                    },
                },
            },
        },
        "DryRunResponse": {
            "type": "object",
            "required": ["claims", "nodes", "checked", "total", "fitting", "complete", "elapsedMs"],
            "properties": {
                "claims": {"type": "array", "items": {"type": "string"}},
                "nodes": {"type": "array", "items": {"$ref": ref + "NodeAnswer"}},
                "checked": {"type": "integer", "minimum": 0},
                "total": {"type": "integer", "minimum": 0},
                "fitting": {"type": "integer", "minimum": 0},
                "complete": {"type": "boolean"},
                "elapsedMs": {"type": "number", "minimum": 0},
            },
        },
        "Error": {
            "type": "object",
            "required": ["error", "problems"],
            "properties": {
                "error": {"type": "string"},
                "problems": {"type": "array", "items": {"type": "string"}},
            },
        },
    }


def _error_responses() -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    retry = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}}
    described = {
        "400": "malformed JSON or a wrong shape; each problem names the field",
        "401": "no credential, or a refused one",
        "403": "authenticated, but not allowed to post to /v1/dryrun (SubjectAccessReview)",
        "413": "body over the size limit",
        "415": "not application/json",
        "422": "the objects cannot be used: a referenced claim or template is missing, a node is unknown, "
        "the API server would refuse an object",
        "429": "rate limit reached",
        "503": "not synced yet, busy, the TokenReview or SubjectAccessReview failed, or no node checked "
        "within the deadline",
    }
    return {
        code: {
            "description": text,
            "content": error,
            **({"headers": retry} if code in ("429", "503") else {}),
        }
        for code, text in described.items()
    }


def openapi_document(settings: DryRunSettings) -> dict[str, Any]:
    """OpenAPI 3.1 for the endpoint, with this server's limits."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "draguard dry-run",
            "version": "v1",
            "description": (__doc__ or "").split("\n\n")[0],
        },
        "paths": {
            DRYRUN_PATH: {
                "post": {
                    "operationId": "dryRun",
                    "summary": "would this pod or these claims fit: per node, devices, footprint, quota",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/DryRunRequest"}}
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "the answer, possibly partial (complete: false)",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/DryRunResponse"}
                                }
                            },
                        },
                        **_error_responses(),
                    },
                    "security": [] if settings.demo else [{"bearerToken": []}, {"clientCertificate": []}],
                }
            },
            OPENAPI_PATH: {
                "get": {
                    "operationId": "openAPI",
                    "summary": "this document",
                    "responses": {"200": {"description": "OpenAPI 3.1"}},
                }
            },
        },
        "components": {
            "schemas": _schemas(settings),
            "securitySchemes": {
                "bearerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "any token the cluster's API server accepts (TokenReview)",
                },
                "clientCertificate": {
                    "type": "mutualTLS",
                    "description": "a certificate issued by --dryrun-client-ca",
                },
            },
        },
    }
