"""The HTTPS admission server (``/validate``, ``/mutate``, ``/healthz``, ``/readyz``) and the metrics server.

What the API server gets back, whatever it sends:

* a body that is not an answerable AdmissionReview: HTTP 400 with the reason (413 over 3 MiB,
  :mod:`webhook.bodies`); 429 for a large body while the decoder is busy (below);
* otherwise an AdmissionReview with the request's uid: the rules' decision, or a denial that names
  the field when the object itself cannot be decoded;
* never a 500: the rule engine contains a failing rule, and anything else that fails is logged and
  answered as a 400, which the API server treats per the webhook's failurePolicy, like a 500.

The rules are synchronous code. Most checks take microseconds and run inline on the event loop:
handing them to a thread costs more than the check, because the thread then waits for the GIL
while the loop serves other connections (measured: 2.5x the CPU per request, 3x the median
latency). A check that may take long (:meth:`policies.rules.engine.Rule.costly`: a dry run over
every node, selectors over every device, a ledger write) runs on a thread while the loop keeps
accepting requests, under a deadline (below the webhook configuration's ``timeoutSeconds``,
counted from the request's arrival); when it passes, the answer is what every applicable rule's
failure policy says (:func:`policies.rules.engine.decide_unavailable`) and the check is told to stop
(``Context.cancelled``). Two costly checks compute at a time; the others wait in line for their
turn, first come first served, each until its deadline less what a check of its webhook has lately
taken, and only then get that answer, saying how long they waited (:class:`Line`; issue 30: a
burst of 200 reservations is decided, not refused). A check that waits on the API server (the
quota ledger's write) hands its turn to the next in line meanwhile (``Context.waiting_on_api``).

Hostile and heavy input must not stall cheap reviews or the probes (issue 16, measured with
``benchmarks/fuzz.py``): bodies over 256 KiB are decoded on a thread of their own, one at a time
with one waiting, else 429; long CEL expressions are compiled in a worker process
(:mod:`webhook.celworker`); the probes and metrics run on a :class:`SideLoop`; and while serving, a
thread waiting for the GIL asks for it after 1 ms instead of 5.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic_core import to_json

from certs.reloader import CertReloader
from policies.api.admission import AdmissionRequest
from policies.config import Config
from policies.rules import engine
from policies.rules.engine import Context, Decision, Request, Rule
from policies.rules.request import UndecodableObject
from webhook import bodies, logs, review
from webhook.celworker import CelWorker
from webhook.metrics import Metrics
from webhook.state import State
from webhook.threads import IdleEndingThreads

log = logging.getLogger(__name__)
T = TypeVar("T")
# The rules' view of a review's object, or why the object cannot be decoded.
Decoded = Request | UndecodableObject

# The chart's webhook configurations wait 5 s (timeoutSeconds); answering within 4 s leaves the
# API server time to receive the answer before it gives up and applies the failurePolicy itself.
DEFAULT_DEADLINE = 4.0
# Costly checks compute on this many threads at a time; the others wait in line (see Line).
COSTLY_WORKERS = 2
# Checks waiting on the API server (the quota ledger's write) hold a thread but no turn: this many
# may wait so at once, their charges for one namespace written together (webhook/ledger.py). A
# waiting thread costs memory, not CPU; 32 could all be taken in a burst of 1,000 reservations over ten
# namespaces, and the next reservations refused, while the API server answered slowly.
API_WAITERS = 256
# What a costly check is taken to need when none of its webhook has finished lately, and how many
# of the latest are remembered (the need is their median).
NEED_UNKNOWN = 0.0
NEED_SAMPLES = 20
# Bodies larger than this are decoded on a thread of their own, one at a time, with one more
# waiting; past that they are answered 429. A Pod of 3 MiB (17,000 containers) takes pydantic over
# a second to decode: on the event loop every other request would wait that long.
LARGE_BODY = 256 * 1024
LARGE_WAITING = 1
# A thread that wants the GIL waits this long before asking the holder to drop it: 5 ms by
# default, which the event loop paid after every socket wait while costly checks compiled CEL on
# the pool threads (py-spy: the loop held the GIL 9% of the time, four pool threads 84%).
SWITCH_INTERVAL = 0.001
# On SIGTERM, how long open connections may carry on before they are closed: each answer meanwhile
# says "Connection: close", so the client opens its next connection elsewhere (see drain()).
DRAIN_SECONDS = 5.0
DRAINING = web.AppKey("draining", asyncio.Event)
# Work with lasting effects (the quota ledger's write) ends this long before the deadline, so that
# its outcome, not the deadline's refusal, is what the API server is told.
EFFECTS_MARGIN = 0.25
# How often the event loop's lateness is sampled, and over how many samples the recent lag is the
# largest (see LoopLag).
LAG_INTERVAL = 0.1
LAG_SAMPLES = 50


class LoopLag:
    """How late the event loop has run its timers over the last few seconds.

    The deadline's answer is a timer on the loop, and under overload the loop runs late: it shares
    the GIL with the costly checks, the dry run and the decoder, and the machine's cores with
    other processes. In issue 16's fuzz a few answers of 100,000 went out over a second after
    their deadline, past the API server's 5 s. The deadlines are set earlier by the largest lag of
    the last ``LAG_SAMPLES`` samples, so that a late loop still answers in time; on a loop that
    keeps up the lag is a millisecond and the deadline what it says.
    """

    def __init__(self) -> None:
        self._samples: deque[float] = deque(maxlen=LAG_SAMPLES)

    def recent(self) -> float:
        return max(self._samples, default=0.0)

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(LAG_INTERVAL)
            self._samples.append(max(0.0, loop.time() - before - LAG_INTERVAL))


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


class Backlog:
    """Work handed to a thread pool (the large bodies' decoder), counted until a thread is done
    with it, with a limit.

    A deadline stops the caller waiting, not the thread: a decode past its deadline still holds a
    worker and its share of the GIL. Counting until the thread is done, and refusing new work past
    ``limit`` (the caller answers 429 at once instead), keeps such work from piling up and starving
    the event loop of the GIL. (Costly checks wait in a :class:`Line` instead.)
    """

    def __init__(self, executor: Executor, limit: int) -> None:
        self.executor = executor
        self.limit = limit
        self._count = 0
        self._lock = threading.Lock()

    def full(self) -> bool:
        return self._count >= self.limit

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        with self._lock:
            self._count += 1
        future = self.executor.submit(fn, *args)
        future.add_done_callback(self._done)  # when the thread is done, or the work cancelled unstarted
        return asyncio.wrap_future(future)

    def _done(self, _: object) -> None:
        with self._lock:
            self._count -= 1


class Late(Exception):
    """A costly check's turn did not come while there was time left to run it."""

    def __init__(self, waited: float, ahead: int, need: float) -> None:
        super().__init__(f"waited {waited:.2f}s with {ahead} ahead")
        self.waited, self.ahead, self.need = waited, ahead, need


@dataclass
class _Progress:
    """How far a costly check got (``time.perf_counter`` seconds; None: not yet), set by its
    thread and read when its deadline passes: an answer that only said "no answer within the
    deadline" left an admin to guess whether draguard or the API server was slow (issue 30)."""

    began: float | None = None  # the thread started it
    on_api: float | None = None  # it started waiting on the API server

    def waiting_on_api(self) -> None:
        if self.on_api is None:
            self.on_api = time.perf_counter()

    def where(self, arrived: float, now: float) -> str:
        """Where the time since ``arrived`` went, until ``now``."""
        if self.began is None:
            return f"{now - arrived:.2f}s waiting for its turn"
        turn = f"{self.began - arrived:.2f}s waiting for its turn"
        if self.on_api is None:
            return f"{turn}, then {now - self.began:.2f}s checking"
        checking = f"{self.on_api - self.began:.2f}s checking"
        return f"{turn}, {checking}, then {now - self.on_api:.2f}s waiting on the API server"


@dataclass
class _Job:
    """One check on its thread, as the event loop counts it."""

    kind: str
    started: float
    computing: bool = True  # holds its turn (not yet waiting on the API server)


class Line:
    """Costly checks taking turns on a thread pool: ``turns`` compute at once, the others wait in
    line, first come first served, each as long as it has time (issue 30).

    Refusing a check at once when the pool was full answered a burst (200 pods and reservations at
    once, an ordinary Job) with hundreds of "draguard is busy" refusals, each a failed API request
    for a controller to back off from, although nearly all could have been decided within their
    deadline. A check now waits for its turn until its deadline less what a check of its kind
    (:func:`_kind`) has lately taken (the median of the last ``NEED_SAMPLES``), so that it does not
    start what it cannot finish; only then is it answered per the failure policy.

    A turn is held until the thread is done with the work, not until the caller stops waiting (a
    check past its deadline still holds the GIL until it sees ``Context.cancelled``), so such work
    cannot pile up and starve the event loop. A check that waits on the API server hands its turn
    to the next in line and keeps only its thread: the pool has ``threads``, ``turns`` of them for
    computing and the rest for waiting. The counts change on the event loop only (the threads ask
    it to), so they need no lock.
    """

    def __init__(self, executor: Executor, turns: int, threads: int) -> None:
        self.executor = executor
        self.turns = turns
        self.threads = threads
        self._computing = 0  # turns held
        self._busy = 0  # threads held, computing or waiting on the API server
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._took: dict[str, deque[float]] = {}

    def need(self, kind: str) -> float:
        """What a check of ``kind`` has lately taken of its turn: from its turn to its answer, or
        to its hand-on when it then waited on the API server. The wait is left out: a check waiting
        on the ledger holds no turn, and the ledger keeps its own deadline (1,000 reservations over
        ten namespaces: with an API server slow to write, a reservation's turn-to-answer time passed
        the deadline, and every new one was refused at once, although its turn took milliseconds)."""
        took = self._took.get(kind)
        return statistics.median(took) if took else NEED_UNKNOWN

    async def run(self, kind: str, left: float, work: Callable[[Callable[[], None]], T]) -> asyncio.Future[T]:
        """Wait for a turn, then start ``work(hand_on)`` on a thread, where ``hand_on()`` says that it
        waits on the API server from now on; the future of its result. Raises :class:`Late` when no
        turn comes while ``need(kind)`` of the ``left`` seconds remain."""
        await self._turn(kind, left)
        loop = asyncio.get_running_loop()
        job = _Job(kind, loop.time())

        def on_loop(callback: Callable[[_Job], None]) -> Callable[..., None]:
            def call(*_: object) -> None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped
                    loop.call_soon_threadsafe(callback, job)

            return call

        try:
            future = self.executor.submit(work, on_loop(self._hand_on))
        except RuntimeError:  # the pool is shut down
            self._finish(job)
            raise
        future.add_done_callback(on_loop(self._finish))  # the thread is done, or the work cancelled unstarted
        return asyncio.wrap_future(future)

    async def _turn(self, kind: str, left: float) -> None:
        if not self._waiting and self._free():
            self._take()
            return
        loop = asyncio.get_running_loop()
        need = self.need(kind)
        if left <= need:
            raise Late(0.0, len(self._waiting), need)
        arrived = loop.time()
        granted: asyncio.Future[None] = loop.create_future()
        self._waiting.append(granted)
        timer = loop.call_later(left - need, self._give_up, granted)
        try:
            await granted
        except TimeoutError:
            raise Late(loop.time() - arrived, len(self._waiting), need) from None
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # granted as its caller went away
                self._computing -= 1
                self._busy -= 1
                self._grant()
            with contextlib.suppress(ValueError):
                self._waiting.remove(granted)
            raise
        finally:
            timer.cancel()

    def _free(self) -> bool:
        return self._computing < self.turns and self._busy < self.threads

    def _take(self) -> None:
        self._computing += 1
        self._busy += 1

    def _give_up(self, granted: asyncio.Future[None]) -> None:
        if not granted.done():
            self._waiting.remove(granted)
            granted.set_exception(TimeoutError())

    def _grant(self) -> None:
        while self._waiting and self._free():
            granted = self._waiting.popleft()
            if not granted.done():
                self._take()
                granted.set_result(None)

    def _hand_on(self, job: _Job) -> None:
        """The job's turn is over (it waits on the API server now, or its thread is done): what it
        took is noted for :meth:`need`, and the turn given to the next in line."""
        if job.computing:
            job.computing = False
            took = asyncio.get_running_loop().time() - job.started
            self._took.setdefault(job.kind, deque(maxlen=NEED_SAMPLES)).append(took)
            self._computing -= 1
            self._grant()

    def _finish(self, job: _Job) -> None:
        self._hand_on(job)
        self._busy -= 1
        self._grant()


def _kind(webhook: str, request: Request) -> str:
    """What a costly check's time is estimated by: the webhook path and the operation on a
    resource. The quota webhook's dry run of a pod and ledger write for a reservation take
    different times, and a slow ledger must not make a pod's check look hopeless."""
    resource = f"{request.resource}/{request.sub_resource}" if request.sub_resource else request.resource
    return f"{webhook}: {request.operation} {resource}"


def _threads(workers: int, name: str) -> Callable[[], Executor]:
    return lambda: IdleEndingThreads(workers, name)


@dataclass
class Admission:
    """Everything a decision needs besides the request; one per server."""

    rules: Mapping[str, tuple[Rule, ...]]
    config: Config
    state: State
    metrics: Metrics
    deadline: float = DEFAULT_DEADLINE
    # Webhook path -> its own deadline, where it differs from ``deadline`` (see deadline_of).
    deadlines: Mapping[str, float] = field(default_factory=dict)
    decisions: logs.DecisionLog = field(default_factory=logs.DecisionLog)
    executor: Executor = field(default_factory=_threads(COSTLY_WORKERS + API_WAITERS, "draguard-decide"))
    decoder: Executor = field(default_factory=_threads(1, "draguard-decode"))
    cel: CelWorker = field(default_factory=CelWorker)
    lag: LoopLag = field(default_factory=LoopLag)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    costly_turns: int = COSTLY_WORKERS

    def __post_init__(self) -> None:
        self.costly = Line(self.executor, self.costly_turns, self.costly_turns + API_WAITERS)
        self.large = Backlog(self.decoder, 1 + LARGE_WAITING)
        self.metrics.loop_lag = self.lag.recent

    def context(self, deadline: float | None = None) -> Context:
        """The snapshot a request keeps from start to end, and whether it is fresh enough to trust;
        ``deadline`` (monotonic) is when the request's answer goes out whatever the rules do."""
        fresh = self.state.age() <= self.config.snapshot.max_age_seconds
        return Context(
            self.state.snapshot, self.config, self.clock(), fresh, deadline, compile=self.cel.compile
        )

    async def handle(self, webhook: str, http: web.Request) -> web.Response:
        started = time.perf_counter()
        self.metrics.in_flight += 1
        try:
            try:
                raw = await bodies.read(http, review.MAX_BODY_BYTES)
                if len(raw) > LARGE_BODY and self.large.full():
                    busy = f"{self.large.limit} bodies over {LARGE_BODY} bytes are being decoded"
                    return self._busy(webhook, busy, started)
                try:
                    request, decoded = await self._decode(webhook, raw, started)
                except TimeoutError:
                    late = f"the review was not decoded within the {self.deadline_of(webhook):g}s deadline"
                    return self._busy(webhook, late, started)
            except bodies.BadBody as err:
                return self._reject(webhook, err.status, str(err), started)
            except review.BadReview as err:
                return self._reject(webhook, 400, str(err), started)
            return await self._answer(webhook, request, decoded, started)
        except Exception as err:  # a bug of ours: log it, keep serving, and still never answer 500
            log.exception("failed to process an admission review")
            reason = f"draguard could not process the review: {type(err).__name__}"
            return self._reject(webhook, 400, reason, started)
        finally:
            self.metrics.in_flight -= 1

    def deadline_of(self, webhook: str) -> float:
        """How long after a request's arrival its answer goes out: each webhook of the chart has its
        own timeoutSeconds (the quota rule's, which writes through the API server, is the longest),
        and each path its deadline below it (``serve --deadline PATH=SECONDS``); else the default."""
        return self.deadlines.get(webhook, self.deadline)

    def _left(self, webhook: str, started: float) -> float:
        """What is left of the request's deadline: it counts from the request's arrival, as the
        API server's timeout does, whatever the request waited for before, and ends early by how
        late the loop has lately run its timers (:class:`LoopLag`)."""
        return max(0.0, self.deadline_of(webhook) - self.lag.recent() - (time.perf_counter() - started))

    async def _decode(self, webhook: str, raw: bytes, started: float) -> tuple[AdmissionRequest, Decoded]:
        """The review and its object decoded: inline, or for a large body on the decoder thread,
        where the event loop keeps answering other requests while pydantic works (TimeoutError
        when that takes past the deadline)."""
        if len(raw) <= LARGE_BODY:
            return _decoded(raw)
        return await asyncio.wait_for(self.large.submit(_decoded, raw), self._left(webhook, started))

    async def _answer(
        self, webhook: str, request: AdmissionRequest, decoded: Decoded, started: float
    ) -> web.Response:
        if isinstance(decoded, UndecodableObject):
            payload = review.undecodable(request.uid, request.kind.kind, decoded)
            self._record(webhook, request, Decision(False, f"cannot decode: {decoded}"), started)
            return _json(payload)
        decision = await self._decide(webhook, decoded, started)
        self._record(webhook, request, decision, started)
        return _json(review.answer(request.uid, decision))

    async def _decide(self, webhook: str, request: Request, started: float) -> Decision:
        """The decision, with the answer settled (``Context.answer``): a rule's lasting effects for
        an answer that did not admit the request are undone (issue 30's phantom charges)."""
        ctx = self.context(time.monotonic() + self._left(webhook, started) - EFFECTS_MARGIN)
        allowed = False
        try:
            decision = await self._checked(webhook, request, ctx, started)
            allowed = decision.allowed
            return decision
        finally:
            ctx.answer.settle(allowed)

    async def _checked(self, webhook: str, request: Request, ctx: Context, started: float) -> Decision:
        chosen = engine.applicable(request, self.rules[webhook], ctx)
        if not any(rule.costly(request, ctx) for rule, _ in chosen):
            return engine.decide_applicable(request, chosen, ctx)
        # Past the deadline (or when the server stops) the thread is told to stop, not only left
        # behind: a check nobody waits for would hold a worker and the CPU (see Line).
        stop = threading.Event()
        progress = _Progress()

        def work(hand_on: Callable[[], None]) -> Decision:
            progress.began = time.perf_counter()

            def waiting_on_api() -> None:
                progress.waiting_on_api()
                hand_on()

            checking = replace(ctx, cancelled=stop.is_set, waiting_on_api=waiting_on_api)
            return engine.decide_applicable(request, chosen, checking)

        try:
            answer = await self.costly.run(_kind(webhook, request), self._left(webhook, started), work)
            return await asyncio.wait_for(answer, self._left(webhook, started))
        except Late as late:
            return engine.decide_unavailable(chosen, self._late(webhook, late))
        except TimeoutError:
            where = progress.where(started, time.perf_counter())
            overdue = f"no answer within the {self.deadline_of(webhook):g}s deadline: {where}"
            return engine.decide_unavailable(chosen, overdue)
        finally:
            stop.set()

    def _late(self, webhook: str, late: Late) -> str:
        """Why a costly check was not run: how long it waited for a turn, and for what."""
        due = self.deadline_of(webhook)
        return (
            f"draguard is busy: waited {late.waited:.2f}s for one of its {self.costly.turns} costly-check "
            f"turns ({late.ahead} still ahead) and no turn would come with time left to check: such a "
            f"check has lately taken {late.need:.2f}s, and the answer is due within {due:g}s"
        )

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

    def _busy(self, webhook: str, why: str, started: float) -> web.Response:
        """429 for a large body that cannot be decoded in time: the API server applies the webhook's
        failurePolicy, as it would after a timeout, but at once."""
        busy = self._reject(webhook, 429, f"draguard is busy: {why}", started)
        busy.headers["Retry-After"] = "1"
        return busy


def _decoded(raw: bytes) -> tuple[AdmissionRequest, Decoded]:
    """The review of ``raw`` and the rules' view of it, or why its object cannot be decoded."""
    request = review.parse(raw)
    try:
        return request, review.to_request(request)
    except UndecodableObject as err:
        return request, err


@web.middleware
async def close_unless_read(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer, and ask the client to close the connection when the body was not read to its end,
    or when the server is draining (:func:`drain`).

    After the answer aiohttp reads what is left of the body, to find where the next request
    starts, and closes the connection when it cannot: a body that does not decode, or one past the
    size limit still arriving. An answer that said keep-alive is then followed by a close the client
    does not expect, and its next request on that connection is lost (issue 16's dropped
    connections: a dry run refused before its gzip body was read, then a small review on the same
    connection). ``Connection: close`` in the answer makes the client open a new one instead.
    """
    try:
        response = await handler(request)
    except web.HTTPException as refused:  # the router's 404 and 405, before any body is read
        if not request.content.is_eof():
            refused.force_close()
        raise
    if not request.content.is_eof() or request.app[DRAINING].is_set():
        response.force_close()
    return response


def _application(**options: Any) -> web.Application:
    app = web.Application(middlewares=[close_unless_read], **options)
    app[DRAINING] = asyncio.Event()
    return app


async def drain(runner: web.AppRunner, seconds: float) -> None:
    """Let the open connections end on an answer before the server closes them, for at most
    ``seconds``.

    The API server keeps its connections to a webhook open between calls, and a terminating pod
    keeps those it already has (kube-proxy only steers new ones elsewhere). Closing an idle one
    races the API server's next call on it, which then fails with EOF: a failed admission under a
    Fail webhook, seen in the certificate-rotation e2e when a replica stopped. Answering with
    "Connection: close" hands each connection back cleanly; what is still open at the end (idle
    throughout, so the last the client's pool would pick) is closed by the runner's cleanup.
    """
    runner.app[DRAINING].set()
    server = runner.server
    deadline = asyncio.get_running_loop().time() + seconds
    while server is not None and server.connections and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


@dataclass(frozen=True)
class Readiness:
    """What ``/readyz`` reports: ``waiting()`` lists what keeps the server from answering at all (503
    while any), ``notes()`` what it answers worse than it could (said in the 200's body)."""

    waiting: Callable[[], list[str]]
    notes: Callable[[], list[str]] = list


def build_app(admission: Admission, ready: Readiness) -> web.Application:
    """The HTTPS application; ``ready`` is what ``/readyz`` reports."""
    app = _application(client_max_size=review.MAX_BODY_BYTES)
    for webhook in admission.rules:
        app.router.add_post(f"/{webhook}", functools.partial(admission.handle, webhook))
    _add_probes(app, ready)
    return app


def build_health_app(ready: Readiness) -> web.Application:
    """The probes again, on their own plain-HTTP port: for the kubelet, they answer before a
    certificate is served, so a replica waiting for the elected one to write the first pair is
    not restarted by its liveness probe for a handshake it cannot complete yet."""
    app = _application()
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
    app = _application()

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


class SideLoop:
    """An event loop on a thread of its own, for the plain-HTTP listeners (probes and metrics).

    On the main loop a probe waits for every callback queued before it: with sixteen requests in
    flight, each decoding a large body or checking a long selector inline, ``/healthz`` answered in
    up to 4.7 s while the chart's probes give up after 2 s (issue 16), and the kubelet would have
    restarted a replica for being busy. Here it waits only for the GIL, which a CPU-bound thread
    hands over every switch interval between bytecodes; the longest single C call that holds it
    (pydantic decoding a 3 MiB object) is what remains (measured in benchmarks/README.md).
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="draguard-probes", daemon=True)
        self._thread.start()

    async def call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the side loop and wait for it from the calling loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


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
    """Serve ``app`` (:func:`build_app`, and whatever else shares the port) over ``tls``, and on a
    :class:`SideLoop` the metrics and the probes answering ``ready`` as ``app`` does, until ``stop``
    is set, then :func:`drain` for up to :data:`DRAIN_SECONDS`; ``started(ports)`` runs once all
    three listen."""
    plain = (
        (build_metrics_app(admission.metrics), listen.metrics_port),
        (build_health_app(ready), listen.health_port),
    )
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    side = SideLoop()
    runner: web.AppRunner | None = None
    side_runners: list[web.AppRunner] = []
    try:
        runner, port = await _start(app, listen.host, listen.port, tls)
        bound = [port]
        for plain_app, plain_port in plain:
            side_runner, port = await side.call(_start(plain_app, listen.host, plain_port, None))
            side_runners.append(side_runner)
            bound.append(port)
        watches = [asyncio.create_task(w) for w in (tls.watch(reload_interval), admission.lag.watch())]
        try:
            started(Ports(*bound))
            await stop.wait()
            await drain(runner, DRAIN_SECONDS)
        finally:
            for watch in watches:
                watch.cancel()
    finally:
        if runner is not None:
            await runner.cleanup()
        for side_runner in side_runners:
            await side.call(side_runner.cleanup())
        side.close()
        for executor in (admission.executor, admission.decoder):
            executor.shutdown(wait=False, cancel_futures=True)
        admission.cel.close()
        sys.setswitchinterval(switch_interval)
