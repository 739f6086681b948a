"""The HTTPS admission server (``/validate``, ``/mutate``, ``/healthz``, ``/readyz``) and the metrics server.

What the API server gets back, whatever it sends:

* a body that is not an answerable AdmissionReview: HTTP 400 with the reason (413 over 3 MiB);
* otherwise an AdmissionReview with the request's uid: the rules' decision, or a denial that names
  the field when the object itself cannot be decoded;
* never a 500: the rule engine contains a failing rule, and anything else that fails is logged and
  answered as a 400, which the API server treats per the webhook's failurePolicy, like a 500.

The rules are synchronous code. Most checks take microseconds and run inline on the event loop:
handing them to a thread costs more than the check, because the thread then waits for the GIL
while the loop serves other connections (measured: 2.5x the CPU per request, 3x the median
latency). A check that may take long (:meth:`policies.rules.engine.Rule.costly`: a dry run over
every node, selectors over every device, a ledger write) runs in a small thread pool while the
loop keeps accepting requests and answering probes, under a deadline (below the webhook
configuration's ``timeoutSeconds``); when it passes, the answer is what every applicable rule's
failure policy says (:func:`policies.rules.engine.decide_unavailable`), and the late result is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic_core import to_json

from certs.reloader import CertReloader
from policies.api.admission import AdmissionRequest
from policies.config import Config
from policies.rules import engine
from policies.rules.engine import Context, Decision, Request, Rule
from policies.rules.request import UndecodableObject
from webhook import logs, review
from webhook.metrics import Metrics
from webhook.state import State

log = logging.getLogger(__name__)

# The chart's webhook configurations wait 5 s (timeoutSeconds); answering within 4 s leaves the
# API server time to receive the answer before it gives up and applies the failurePolicy itself.
DEFAULT_DEADLINE = 4.0
# Work with lasting effects (the quota ledger's write) ends this long before the deadline, so that
# its outcome, not the deadline's refusal, is what the API server is told.
EFFECTS_MARGIN = 0.25


def _webhook(rule: Rule) -> str:
    return "mutate" if rule.mutating else "validate"


def _json(payload: dict[str, Any], status: int = 200) -> web.Response:
    # pydantic-core writes the bytes directly: a fifth of json.dumps's time, and no str round trip.
    return web.Response(body=to_json(payload), status=status, content_type="application/json")


def split_rules(rules: Sequence[Rule]) -> dict[str, tuple[Rule, ...]]:
    """The rules behind each path: ``/validate/<rule>`` and ``/mutate/<rule>`` run one rule, so that
    each webhook of a configuration (one per rule, with its own failurePolicy and timeout) asks only
    its own and a request is never decided twice; ``/validate`` and ``/mutate`` run them all, for a
    single catch-all webhook or a person with curl."""
    paths = {
        "validate": tuple(r for r in rules if not r.mutating),
        "mutate": tuple(r for r in rules if r.mutating),
    }
    for rule in rules:
        paths[f"{_webhook(rule)}/{rule.name}"] = (rule,)
    return paths


@dataclass
class Admission:
    """Everything a decision needs besides the request; one per server."""

    rules: Mapping[str, tuple[Rule, ...]]
    config: Config
    state: State
    metrics: Metrics
    deadline: float = DEFAULT_DEADLINE
    decisions: logs.DecisionLog = field(default_factory=logs.DecisionLog)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4, thread_name_prefix="draguard-decide")
    )
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def context(self, deadline: float | None = None) -> Context:
        """The snapshot a request keeps from start to end, and whether it is fresh enough to trust;
        ``deadline`` (monotonic) is when the request's answer goes out whatever the rules do."""
        fresh = self.state.age() <= self.config.snapshot.max_age_seconds
        return Context(self.state.snapshot, self.config, self.clock(), fresh, deadline)

    async def handle(self, webhook: str, http: web.Request) -> web.Response:
        started = time.perf_counter()
        self.metrics.in_flight += 1
        try:
            try:
                body = await http.read()
            except web.HTTPRequestEntityTooLarge:
                return self._reject(webhook, 413, f"body larger than {review.MAX_BODY_BYTES} bytes", started)
            except RequestPayloadError as err:  # a body its Content-Encoding does not decode
                encoding = http.headers.get("Content-Encoding", "")
                reason = f"body cannot be read (Content-Encoding {encoding!r}): {err.__cause__ or err}"
                rejected = self._reject(webhook, 400, reason, started)
                # Where the body ends is unknown now: the connection cannot carry another request.
                rejected.force_close()
                return rejected
            try:
                request = review.parse(body)
            except review.BadReview as err:
                return self._reject(webhook, 400, str(err), started)
            return await self._answer(webhook, request, started)
        except Exception as err:  # a bug of ours: log it, keep serving, and still never answer 500
            log.exception("failed to process an admission review")
            reason = f"draguard could not process the review: {type(err).__name__}"
            return self._reject(webhook, 400, reason, started)
        finally:
            self.metrics.in_flight -= 1

    async def _answer(self, webhook: str, request: AdmissionRequest, started: float) -> web.Response:
        kind = request.kind.kind
        try:
            rule_request = review.to_request(request)
        except UndecodableObject as err:
            payload = review.undecodable(request.uid, kind, err)
            self._record(webhook, request, Decision(False, f"cannot decode: {err}"), started)
            return _json(payload)
        decision = await self._decide(webhook, rule_request)
        self._record(webhook, request, decision, started)
        return _json(review.answer(request.uid, decision))

    async def _decide(self, webhook: str, request: Request) -> Decision:
        ctx = self.context(time.monotonic() + self.deadline - EFFECTS_MARGIN)
        chosen = engine.applicable(request, self.rules[webhook], ctx)
        if not any(rule.costly(request, ctx) for rule, _ in chosen):
            return engine.decide_applicable(request, chosen, ctx)
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self.executor, engine.decide_applicable, request, chosen, ctx)
        try:
            return await asyncio.wait_for(work, self.deadline)
        except TimeoutError:
            return engine.decide_unavailable(chosen, f"no answer within the {self.deadline:g}s deadline")

    def _record(self, webhook: str, request: AdmissionRequest, decision: Decision, started: float) -> None:
        seconds = time.perf_counter() - started
        verdict = "allowed" if decision.allowed else "denied"
        self.metrics.observe(webhook, request.operation, request.kind.kind, verdict, seconds)
        self.metrics.outcomes(decision.outcomes)
        fields: dict[str, Any] = {
            "webhook": webhook,
            "uid": request.uid,
            "operation": request.operation,
            "kind": request.kind.kind,
            "namespace": request.namespace or "",
            "name": request.name or "",
            "user": request.user_info.username or "",
            "decision": verdict,
            "rules": [
                {"rule": o.rule, "mode": o.mode, "action": o.action, "message": o.message}
                for o in decision.outcomes
            ],
            "latency_ms": round(seconds * 1000, 3),
        }
        if not decision.allowed:
            fields["reason"] = decision.message
        if request.dry_run:
            fields["dry_run"] = True
        self.decisions.write(fields, decision.allowed)

    def _reject(self, webhook: str, status: int, reason: str, started: float) -> web.Response:
        seconds = time.perf_counter() - started
        self.metrics.observe(webhook, "", "", "invalid", seconds)
        logs.rejected(reason, {"webhook": webhook, "status": status, "latency_ms": round(seconds * 1000, 3)})
        return _json({"error": reason}, status)


@dataclass(frozen=True)
class Readiness:
    """What ``/readyz`` reports: ``waiting()`` lists what keeps the server from answering at all (503
    while any), ``notes()`` what it answers worse than it could (said in the 200's body)."""

    waiting: Callable[[], list[str]]
    notes: Callable[[], list[str]] = list


def build_app(admission: Admission, ready: Readiness) -> web.Application:
    """The HTTPS application; ``ready`` is what ``/readyz`` reports."""
    app = web.Application(client_max_size=review.MAX_BODY_BYTES)
    for webhook in admission.rules:
        app.router.add_post(f"/{webhook}", functools.partial(admission.handle, webhook))
    _add_probes(app, ready)
    return app


def build_health_app(ready: Readiness) -> web.Application:
    """The probes again, on their own plain-HTTP port: for the kubelet, they answer before a
    certificate is served, so a replica waiting for the elected one to write the first pair is
    not restarted by its liveness probe for a handshake it cannot complete yet."""
    app = web.Application()
    _add_probes(app, ready)
    return app


def _add_probes(app: web.Application, ready: Readiness) -> None:
    """``/healthz``: the event loop answers; ``/readyz``: and nothing is waited for."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        waiting = ready.waiting()
        if waiting:
            return web.Response(status=503, text="not ready: " + "; ".join(waiting))
        return web.Response(text="\n".join(["ok", *ready.notes()]))

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


def readiness(state: State, tls: CertReloader | None, max_age: float | None = None) -> Readiness:
    """Ready once the cluster state is synced and a certificate is served.

    A state older than ``max_age`` (``snapshot.maxAgeSeconds``) is said in the body, and the replica
    stays ready: it still answers every request, the rules that need the state per their failure
    policy. Unready, it would leave the Service, and the API server would answer for it per the
    webhooks' failurePolicy, for every rule alike, the ones that need no cluster state included
    (and a stale state usually strikes every replica at once: the API server is what went away).
    """

    def waiting() -> list[str]:
        reasons = []
        if not state.synced:
            reasons.append("cluster state not synced yet")
        if tls is not None and tls.served is None:
            reasons.append("no TLS certificate loaded yet")
        return reasons

    def notes() -> list[str]:
        age = state.age()
        if max_age is None or not state.synced or age <= max_age:
            return []
        return [
            f"stale: the cluster state was last confirmed {age:.0f}s ago (snapshot.maxAgeSeconds "
            f"{max_age:g}): the rules that need it answer per their failurePolicy"
        ]

    return Readiness(waiting, notes)


def build_metrics_app(metrics: Metrics) -> web.Application:
    app = web.Application()

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/metrics", scrape)
    return app


@dataclass(frozen=True)
class Listen:
    """Where to listen: ``host`` None means every interface; port 0 picks a free port."""

    host: str | None
    port: int
    metrics_port: int
    health_port: int


class Ports(NamedTuple):
    """The ports bound (what port 0 became)."""

    https: int
    metrics: int
    health: int


async def _start(
    app: web.Application, host: str | None, port: int, tls: CertReloader | None
) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.server_context if tls else None)
    await site.start()
    # Without a host, every interface is bound, IPv4 and IPv6 separately; with port 0 each socket
    # gets its own port, and the one to report is the one 127.0.0.1 reaches.
    ipv4 = [address for address in runner.addresses if len(address) == 2]
    bound: int = (ipv4 or runner.addresses)[0][1]
    return runner, bound


async def run(
    app: web.Application,
    ready: Readiness,
    admission: Admission,
    tls: CertReloader,
    listen: Listen,
    stop: asyncio.Event,
    started: Callable[[Ports], None],
    reload_interval: float = 1.0,
) -> None:
    """Serve ``app`` (:func:`build_app`, and whatever else shares the port) over ``tls``, the
    metrics, and the probes answering ``ready`` as ``app`` does, until ``stop`` is set;
    ``started(ports)`` runs once all three listen."""
    plain = (
        (build_metrics_app(admission.metrics), listen.metrics_port),
        (build_health_app(ready), listen.health_port),
    )
    runner, port = await _start(app, listen.host, listen.port, tls)
    runners = [runner]
    try:
        bound = [port]
        for plain_app, plain_port in plain:
            runner, port = await _start(plain_app, listen.host, plain_port, None)
            runners.append(runner)
            bound.append(port)
        reloads = asyncio.create_task(tls.watch(reload_interval))
        try:
            started(Ports(*bound))
            await stop.wait()
        finally:
            reloads.cancel()
    finally:
        for runner in runners:
            await runner.cleanup()
        admission.executor.shutdown(wait=False, cancel_futures=True)
