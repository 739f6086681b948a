"""``POST /v1/dryrun``: would this pod (or these claims) fit, where, with which devices, at what cost.

The HTTP face of :mod:`policies.dryrun` (request and answer: :mod:`policies.dryrun.request` and
:mod:`policies.dryrun.answer`), answered against the live snapshot, off the admission path. This
module keeps only HTTP, authentication and limits. ``draguard serve`` mounts it with
:func:`add_dryrun_routes`; ``GET /v1/openapi.json`` describes it, generated from the pydantic
models of the request and the answer.

Bounds: callers authenticate (:mod:`webhook.auth`) and are rate-limited per caller (429 with
Retry-After); the body, the number of claims and of nodes are capped (413/400); the search has a
budget per node (steps and seconds, like the scheduler's filter timeout) and the request a total
deadline: past it the answer is partial (``complete: false``), or 503 if no node was checked.
The dry run is synchronous, so requests run on one worker thread of their own, never the
admission pool's, and at most ``queue`` wait for it (503 beyond).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from policies.allocator import SearchBudget
from policies.cel import Environment, SelectorCache
from policies.dryrun import DryRunResponse, FeatureGates, Prepared
from policies.dryrun.headroom_answer import HeadroomResponse
from policies.dryrun.headroom_answer import document as headroom_document
from policies.dryrun.request import (
    DryRunRequest,
    HttpQuestion,
    Limits,
    RequestError,
    UnanswerableError,
    answer_request,
    headroom_request,
    parse_request,
)
from policies.snapshot import Snapshot
from webhook import bodies
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
    features: FeatureGates = field(default_factory=FeatureGates)

    def limits(self) -> Limits:
        return Limits(self.max_claims, self.max_nodes, self.default_limit)


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
        help="feature gates, as for draguard allocate (default: the Kubernetes 1.36 defaults)",
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
        given = args.dryrun_features
        features = FeatureGates() if given is None else FeatureGates.parse(given)
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


def parse_question(body: bytes, settings: DryRunSettings, now: datetime) -> HttpQuestion:
    """The request body as a question; raises Problem(400) naming the field for anything malformed.

    At most 200 levels deep, what pydantic's parser reads: the question's pod is validated from its
    JSON form, which pydantic cannot write past about 255 levels (a pod nested 300 levels deep in
    an unknown field was a 500)."""
    try:
        raw = bodies.parse(body, bodies.FAST_DEPTH)
    except bodies.BadBody as err:
        problem = f"body: Invalid value: {err.problem.removeprefix('is ')}"
        raise Problem(400, f"invalid dry-run request: {problem}", [problem]) from None
    try:
        return parse_request(raw, settings.limits(), now)
    except RequestError as err:
        raise Problem(400, str(err), err.problems) from None


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


# --- the answer ------------------------------------------------------------------------------------


class CollectorPause:
    """Python's cyclic garbage collector off while a dry run prepares a snapshot or answers
    (``with COLLECTOR_PAUSE:``).

    An answer is tens of thousands of short-lived objects (node answers, allocation results, their
    JSON), none in a reference cycle: reference counting frees them all once the answer is encoded.
    While they live, though, their allocations set off collections, and a full one walks the
    prepared snapshot's allocator and nodes (some 300,000 objects kept as long as the snapshot, not
    frozen like the snapshot itself): a third of the server's time for an answer listing 5,000
    nodes. Paused, the collector's counts fall back as the answer is freed, so no collection is
    owed afterwards. Overlapping dry runs (one worker per endpoint, but a process may hold several
    endpoints) share one pause: the collector comes back when the last ends, and only if it was on
    before the first. Cyclic garbage that other threads make meanwhile waits for the first
    collection after the pause, at most a dry-run deadline later.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._running == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._running += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._resume:
                gc.enable()


COLLECTOR_PAUSE = CollectorPause()


def encoded_answer(
    question: HttpQuestion, prepared: Prepared, settings: DryRunSettings, deadlines: Deadlines
) -> bytes:
    """The 200 answer's body for ``question`` on a prepared snapshot, or Problem (422: objects that
    cannot be used; 503: no node checked in time). Encoded by pydantic-core in one pass: an answer
    listing 5,000 nodes is megabytes, and building its dicts first cost more than answering. The
    cyclic garbage collector is paused meanwhile (:class:`CollectorPause`)."""
    budget = deadlines.budget(settings.node_max_steps)
    with COLLECTOR_PAUSE:
        if question.headroom:
            return _headroom_answer(question, prepared, settings, deadlines, budget)
        try:
            answer = answer_request(question, prepared, budget=budget, pace=deadlines)
        except UnanswerableError as err:
            raise Problem(422, str(err), err.problems) from None
        if not answer.checked and answer.total:
            raise Problem(
                503,
                f"no node could be checked within the {settings.timeout:g}s dry-run deadline",
                retry_after=settings.timeout,
            )
        return DryRunResponse(**dict(answer), elapsed_ms=deadlines.elapsed_ms()).to_json_bytes()


def _headroom_answer(
    question: HttpQuestion,
    prepared: Prepared,
    settings: DryRunSettings,
    deadlines: Deadlines,
    budget: SearchBudget,
) -> bytes:
    """``"headroom": true``: copies placed until one does not fit, ``max`` or the deadline (the
    answer then says how many fit at least, ``limit.by: Deadline``)."""
    try:
        found = headroom_request(question, prepared, budget=budget, pace=deadlines)
    except UnanswerableError as err:
        raise Problem(422, str(err), err.problems) from None
    answer = headroom_document(found, question.max, settings.features.changed())
    fields = {name: value for name, value in dict(answer).items() if name != "kind"}
    return HeadroomResponse(**fields, elapsed_ms=deadlines.elapsed_ms()).to_json_bytes()


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
    try:
        return await bodies.read(request, limit)
    except bodies.BadBody as err:
        flag = " (--dryrun-max-body)" if err.status == 413 else ""
        raise Problem(err.status, f"request {err}{flag}") from None


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
            Environment("stored", list_type_attributes=settings.features.allocator().list_type_attributes)
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

    def _work(self, question: HttpQuestion, snapshot: Snapshot, deadlines: Deadlines) -> bytes:
        """On the worker thread: prepare the snapshot once, then answer. Preparing runs with the
        collector paused too: as the allocator grows, full collections walk it again and again
        (they doubled the cost of a new snapshot's first dry run)."""
        if self._prepared is None or self._prepared[0] is not snapshot:
            with COLLECTOR_PAUSE:
                prepared = Prepared.of(snapshot, self.settings.features, self._cel_cache)
            self._prepared = (snapshot, prepared)
        return encoded_answer(question, self._prepared[1], self.settings, deadlines)

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


class Error(BaseModel):
    """Every refusal's body."""

    error: str
    problems: list[str]


def _schemas(settings: DryRunSettings) -> dict[str, Any]:
    """The JSON Schemas of the request, the answer and an error, from their pydantic models, with
    this server's limits."""
    _, top = models_json_schema(
        [
            (DryRunRequest, "validation"),
            (DryRunResponse, "serialization"),
            (HeadroomResponse, "serialization"),
            (Error, "serialization"),
        ],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = top["$defs"]
    request = schemas["DryRunRequest"]["properties"]
    request["claims"]["maxItems"] = request["claimTemplates"]["maxItems"] = settings.max_claims
    nodes = next(s for s in request["nodes"]["anyOf"] if s.get("type") == "array")
    nodes.update(maxItems=settings.max_nodes, uniqueItems=True)
    limit = next(s for s in request["limit"]["anyOf"] if s.get("type") == "integer")
    limit["maximum"] = settings.max_nodes
    request["limit"]["description"] = f"node answers to return (default {settings.default_limit})"
    return schemas


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
                            "description": "the answer, possibly partial (complete: false); with "
                            '"headroom": true, a HeadroomResponse',
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "anyOf": [
                                            {"$ref": "#/components/schemas/DryRunResponse"},
                                            {"$ref": "#/components/schemas/HeadroomResponse"},
                                        ]
                                    }
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
