"""The DRA quota ledger in the API server: one ConfigMap per namespace, updated with optimistic concurrency.

Replicas of the webhook share nothing in memory, yet charging a claim's node-allocatable footprint
against a quota is a read-check-write that two replicas can race: both read "8 of 12 CPUs used",
both admit 4 more. Upstream's ResourceQuota admission plugin solves the same problem by writing the
new usage into the ResourceQuota's status with the resourceVersion it read: the API server rejects
the second write with 409 Conflict, and the loser re-reads and re-checks. draguard does the same on
its own object, so the API server (etcd) is the one serialisation point and draguard adds no
database.

Why a ConfigMap named ``draguard-quota-ledger`` in each namespace:

* a ResourceQuota's ``status.used`` is owned by the quota controller, which recomputes it from
  upstream's evaluators and would erase anything draguard added (and writing it would need rights
  on every quota); a CRD would need installing cluster-wide and its own RBAC story;
* a ConfigMap exists in every cluster, carries a resourceVersion for compare-and-swap, and RBAC can
  grant get/update on exactly that name (the chart does: ``resourceNames: [draguard-quota-ledger]``;
  create cannot be limited by name, so it is granted separately);
* one per namespace keeps the contention where quotas are (a namespace's admissions conflict with
  each other, never with another namespace's) and each object small: one data key per claim uid,
  ``{"charge": {"requests.cpu": "4", ...}, "at": "<RFC 3339>", "by": "<token of the write>"}``,
  about 170 bytes, so a namespace holds thousands of charged claims well under the 1 MiB object
  limit.

Charges are keyed by claim uid, so writing one is idempotent: a write whose answer was lost and is
retried finds its own charge already there and does not add it twice. A charge whose release was
never seen (a claim deleted while every replica was down, a write that failed after the decision)
is healed by :meth:`ApiLedgerStore.reconcile`, which makes the ledger equal to what the snapshot
says; entries the snapshot may not reflect yet (:data:`LANDING`) are left alone, because it may
not show yet the reservation that an admission charged a moment ago. A release is kept the same way, as an
entry with an empty charge (a tombstone, charging nothing): the claim's deletion or deallocation
reaches the snapshot only after the webhook allowed it, and a reconcile in between (on any
replica) would otherwise put the released charge back as "lost".
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import urllib3

from policies.answer import Answer
from policies.api.quantity import Quantity, QuantityError
from policies.quota import (
    Charge,
    ChargeCheck,
    Exceeded,
    Ledger,
    LedgerStore,
    LedgerUnavailable,
    quota_namespaces,
    snapshot_ledger,
)
from policies.rules.engine import Rule
from policies.rules.quota import QuotaRule
from policies.snapshot import Snapshot

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)

LEDGER_NAME = "draguard-quota-ledger"
# Changed by a write that changes no entry, so that it still moves the resourceVersion (a fence).
FENCE = "draguard.io/ledger-fence"
MANAGED_BY = {"app.kubernetes.io/managed-by": "draguard"}
# Bounded, like upstream's quota admission retries: under heavy contention a request gives up and is
# answered per the rule's failure policy rather than spinning past the webhook deadline (4 s).
MAX_ATTEMPTS = 40
CONNECT_TIMEOUT = 1.0
# Without a deadline (reconcile, taking a charge back): how long an answer is waited for. Nobody
# waits on these; at 1 s an API server slowed by load (the soak, load 15) timed out every
# reconcile, and phantom charges outlived their bound.
READ_TIMEOUT = 5.0
# How long after a ledger write the claim's own write may still land in the API server (the rest of
# the admission chain, etcd) and reach a watch: reconcile leaves entries this young, counted back
# from the moment its snapshot was last known current, as they are.
LANDING = timedelta(seconds=20)
# A request to the API server is not started with less time than this before the caller's deadline.
MIN_CALL = 0.05


class Conflict(Exception):
    """409: someone else wrote the ledger (or created it) since it was read."""


class NotAnswered(LedgerUnavailable):
    """The API server gave no answer (no connection, a timeout, no time left to ask), or 429 or
    5xx: another round may succeed, for the charges with time left. Whether a write so answered was
    applied is unknown until the ledger is read again."""


class OutOfTime(NotAnswered):
    """No time was left to send a request: the API server's own last failure says more."""


Stored = Mapping[str, Any]
"""The ledger ConfigMap as the API server returned it."""

class Entry(NamedTuple):
    """One claim's entry as stored: its charge, when it was written and by which charge's write
    (``by``, a token of that write: what taking the charge back looks for; empty for reconcile's)."""

    charge: Charge
    at: datetime
    by: str = ""


Entries = Mapping[str, Entry]
"""The ledger of one namespace as stored: claim uid -> its entry."""


def encode_entry(entry: Entry) -> str:
    found: dict[str, Any] = {
        "charge": {k: str(v) for k, v in sorted(entry.charge.items())},
        "at": entry.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if entry.by:
        found["by"] = entry.by
    return json.dumps(found, sort_keys=True)


def decode_entry(uid: str, text: str) -> Entry:
    """One data key; a damaged entry is an error naming the ConfigMap key (never silently dropped,
    which would let quota be overcommitted)."""
    try:
        found = json.loads(text)
        charge = {str(k): Quantity.parse(str(v)) for k, v in found["charge"].items()}
        at = datetime.strptime(found["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        by = str(found.get("by", ""))
    except (ValueError, KeyError, TypeError, AttributeError, QuantityError) as err:
        raise LedgerUnavailable(
            f"ConfigMap {LEDGER_NAME} data key {uid} is not a draguard charge ({err}): delete the key "
            "and let the next reconcile restore it"
        ) from None
    return Entry(MappingProxyType(charge), at, by)


class ConfigMaps:
    """GET/POST/PUT of one ConfigMap per namespace as plain JSON, with short timeouts.

    The client's typed methods would drop unknown fields on a read-modify-write (see
    :mod:`certs.kube`); here it only provides configuration, authentication, TLS and connections.
    """

    def __init__(
        self,
        api: ApiClient,
        name: str = LEDGER_NAME,
        read_timeout: float = READ_TIMEOUT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = _without_retries(api)
        self.name = name
        self._timeouts = (CONNECT_TIMEOUT, read_timeout)
        self._monotonic = monotonic

    def _timeouts_until(self, deadline: float | None, what: str) -> float | tuple[float, float]:
        """The request's timeouts: with a ``deadline``, the answer is waited for until then, in
        all (an API server slowed by a burst answered a ledger read in 1.5 s: given up at the read
        timeout and sent again, it queued behind itself), and :class:`NotAnswered` when no time is
        left."""
        if deadline is None:
            return self._timeouts
        left = deadline - self._monotonic()
        if left < MIN_CALL:
            raise OutOfTime(f"{what}: no time left before the webhook answers")
        return left  # the total, connecting included

    def _call(
        self, method: str, path: str, body: dict[str, Any] | None = None, deadline: float | None = None
    ) -> tuple[int, Any]:
        from kubernetes.client.exceptions import ApiException  # only a cluster-backed ledger calls

        timeouts = self._timeouts_until(deadline, f"{method} {path}")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        params = self._api.param_serialize(
            method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            answer = self._api.call_api(*params, _request_timeout=timeouts)
            data: bytes = answer.read()  # type: ignore[no-untyped-call]
        except ApiException as err:
            raise LedgerUnavailable(f"{method} {path}: {err.reason}") from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise NotAnswered(f"{method} {path}: cannot reach the API server: {err}") from None
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = None
        if answer.status == 429 or answer.status >= 500:
            raise NotAnswered(f"{method} {path}: HTTP {answer.status}: {_message(body)}")
        return answer.status, body

    def _path(self, namespace: str, name: str = "") -> str:
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        return f"{path}/{name}" if name else path

    def read(self, namespace: str, deadline: float | None = None) -> tuple[dict[str, str], Stored | None]:
        """The ledger's data, and the whole object as read (None: it does not exist yet)."""
        status, body = self._call("GET", self._path(namespace, self.name), deadline=deadline)
        if status == 404:
            return {}, None
        if status != 200 or not isinstance(body, dict):
            raise LedgerUnavailable(
                f"reading ConfigMap {namespace}/{self.name}: HTTP {status}: {_message(body)}"
            )
        return dict(body.get("data") or {}), body

    def write(
        self, namespace: str, data: Mapping[str, str], base: Stored | None, deadline: float | None = None
    ) -> Stored | None:
        """Create the ledger (``base`` None) or replace ``base`` with new data, every other field
        kept as read (labels or annotations someone added, and the resourceVersion, so that the
        write fails with :class:`Conflict` if the object changed since); the object as stored
        (None if the answer was not one). With a ``deadline`` the write gives up by then (see
        :class:`ApiLedgerStore`)."""
        if base is None:
            metadata = {"name": self.name, "namespace": namespace, "labels": dict(MANAGED_BY)}
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": dict(data)}
            status, answer = self._call("POST", self._path(namespace), body, deadline)
        else:
            body = {**base, "apiVersion": "v1", "kind": "ConfigMap", "data": dict(data)}
            status, answer = self._call("PUT", self._path(namespace, self.name), body, deadline)
        if status == 409:
            raise Conflict(_message(answer))
        if not 200 <= status <= 299:
            raise LedgerUnavailable(
                f"writing ConfigMap {namespace}/{self.name}: HTTP {status}: {_message(answer)}"
            )
        return answer if isinstance(answer, dict) else None


def _without_retries(api: ApiClient) -> ApiClient:
    """A client like ``api`` (its own connections) that sends each request once: urllib3 sends a
    PUT again after a read timeout, with a timeout of its own, so a ledger write given up at its
    deadline was sent again past it, and could be stored after the webhook had answered without
    it. A round that got no answer is retried by the ledger itself, from a fresh read."""
    from kubernetes.client import ApiClient  # only a cluster-backed ledger calls

    configuration = copy.deepcopy(api.configuration)
    configuration.retries = False
    return ApiClient(configuration)


def _message(body: Any) -> str:
    return str(body.get("message")) if isinstance(body, dict) and body.get("message") else "no message"


@dataclass(eq=False)
class _Pending:
    """One charge waiting for its namespace's next batch, or one taken back (``withdraws``)."""

    uid: str
    charge: Charge
    check: ChargeCheck
    deadline: float | None = None
    answer: Answer | None = None
    # the charge's write, as the entry's ``by`` says (what taking it back looks for)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    # taking back the charge of this earlier write instead of charging
    withdraws: _Pending | None = None
    wake: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    finished: bool = False
    result: Exceeded | None = None
    error: LedgerUnavailable | None = None
    # what the write replaced (None: no entry), whether it is stored, and while its outcome is
    # unknown (no answer), the resourceVersion it was written over ("": it created the ledger)
    previous: Entry | None = None
    stored: bool = False
    landing: str | None = None

    def refused(self) -> bool:
        """Whether its request was answered without it: a charge not written yet never will be."""
        return self.answer is not None and self.answer.refused()


class ApiLedgerStore:
    """:class:`policies.quota.LedgerStore` on the API server (the quota rule's shared ledger).

    Group commit: charges and releases for one namespace that arrive while a write is in flight
    wait and go together into the next read-check-write, checked one after the other on the ledger
    as read and written in one compare-and-swap update, as upstream's quota admission batches the
    requests waiting on a namespace; each is answered once the update holding it is stored. Within
    a replica they never conflict with each other, only with other replicas: a conflict (or an API
    server that did not answer) starts the batch over from a fresh read, joined by the charges that
    arrived meanwhile. Whatever one replica wrote, the other reads before deciding, since its write
    is accepted only at the resourceVersion it read. A batch is run by the thread of its first
    request, so a request waits at most for the batch in flight and its own (issue 30: 200
    reservations at once took 6 updates instead of 200).

    Each charge comes with the deadline of its webhook answer and the answer itself
    (:class:`policies.answer.Answer`). A charge stored for an answer that did not admit its request
    is a phantom: quota held for a claim nobody reserved, refusing reservations that fit. So every
    read and write of a batch is cut to end by the earliest deadline in it, and a charge with no
    time left for another round, or whose answer went out already, is left out of the next. That
    still leaves the writes whose answer went out while they were in flight, or that timed out and
    may yet be stored by the API server: once the answer is settled without them, each is taken back
    in a later batch, on a thread of its own (:meth:`_withdraw`). An entry names the write that
    stored it (``by``), so taking it back restores what it replaced only if no later write replaced
    it since; and a write whose outcome is still unknown is fenced off by a write over the same
    resourceVersion, after which it can never be stored.
    """

    def __init__(
        self,
        configmaps: ConfigMaps,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_attempts: int = MAX_ATTEMPTS,
        backoff: Callable[[int], None] | None = None,
    ) -> None:
        self._maps = configmaps
        self._clock = clock
        self._max_attempts = max_attempts
        self._backoff = backoff or _jittered
        self._lock = threading.Lock()
        self._waiting: dict[str, list[_Pending]] = {}
        self._busy: set[str] = set()
        # Each namespace's ledger as this replica last stored it: its next round starts from that
        # instead of reading it again (issue 30: a 1,000-reservation burst's reads 261 -> 144-228).
        # Only a write confirms the copy (its compare-and-swap refuses a stale one, and the round
        # reads); a round that would write nothing reads the ledger and decides again, since a
        # stale copy could refuse a charge that fits now, or miss the entry a release must end.
        self._written: dict[str, Stored] = {}

    def _read(self, namespace: str, deadline: float | None = None) -> tuple[dict[str, Entry], Stored | None]:
        data, stored = self._maps.read(namespace, deadline)
        return _decode(data), stored

    def current(self, namespace: str, deadline: float | None = None) -> Ledger:
        """The namespace's ledger as stored now."""
        entries, _ = self._read(namespace, deadline)
        return _ledger(namespace, entries)

    def charge(
        self,
        namespace: str,
        uid: str,
        charge: Charge,
        check: ChargeCheck,
        deadline: float | None = None,
        answer: Answer | None = None,
    ) -> Exceeded | None:
        """Check against the stored ledger and record the claim's charge (an empty charge releases
        it); the problem that stopped it, or None once recorded. Raises :class:`LedgerUnavailable`,
        also when the write could not be done by ``deadline`` (monotonic seconds). Taken back if
        ``answer`` is settled without admitting the request (see the class)."""
        return self._queue(namespace, _Pending(uid, charge, check, deadline, answer))

    def _queue(self, namespace: str, pending: _Pending) -> Exceeded | None:
        """Wait for ``pending``'s batch (running it, if it is the first) and answer it."""
        with self._lock:
            self._waiting.setdefault(namespace, []).append(pending)
            if namespace not in self._busy:
                self._busy.add(namespace)
                pending.lead = True
        if not pending.lead:
            pending.wake.wait()  # until its batch is done, or it is to run the next one
        if not pending.finished:
            self._lead(namespace)
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _lead(self, namespace: str) -> None:
        """Run the waiting batch, then hand the namespace to the next waiting request, if any."""
        with self._lock:
            batch = self._waiting.pop(namespace, [])
        failure: LedgerUnavailable | None = None
        try:
            self._commit(namespace, batch)  # adds to the batch the charges that join it
        except LedgerUnavailable as err:
            failure = err
        except Exception as err:  # e.g. a bug in a check: the batch must still finish, or its waiters hang
            failure = LedgerUnavailable(f"{type(err).__name__}: {err}")
        for pending in batch:
            if failure is not None and pending.result is None and pending.error is None:
                pending.error = failure
            if pending.answer is not None and (pending.stored or pending.landing is not None):
                pending.answer.unless_admitted(functools.partial(self._withdraw, namespace, pending))
        with self._lock:
            for pending in batch:
                pending.finished = True
                pending.wake.set()
            waiting = self._waiting.get(namespace)
            if waiting:
                waiting[0].lead = True
                waiting[0].wake.set()
            else:
                self._busy.discard(namespace)

    def _withdraw(self, namespace: str, written: _Pending) -> None:
        """Take back ``written``'s charge in a later batch, on a thread of its own: called when its
        answer is settled without it, from the event loop or the thread that wrote it."""

        def run() -> None:
            try:
                self._queue(namespace, _Pending(written.uid, {}, _fits, withdraws=written))
            except LedgerUnavailable as err:
                log.warning(
                    "could not take back the charge of claim %s in ConfigMap %s/%s for a request answered "
                    "without it (reconcile drops it later): %s", written.uid, namespace, self._maps.name, err
                )

        threading.Thread(target=run, name="draguard-ledger-withdraw", daemon=True).start()

    def _commit(self, namespace: str, batch: list[_Pending]) -> None:
        """Round after round until one is stored: a conflict or an API server that did not answer
        starts over, with the charges that arrived meanwhile added to ``batch``."""
        failure: LedgerUnavailable | None = None
        for attempt in range(self._max_attempts):
            if attempt:
                self._backoff(attempt - 1)
                with self._lock:
                    batch.extend(self._waiting.pop(namespace, []))
            active = _in_time(batch, failure)
            if not active:
                return
            try:
                if self._round(namespace, batch, active):
                    return
                failure = None
            except NotAnswered as err:
                failure = failure if isinstance(err, OutOfTime) and failure is not None else err
        if failure is not None:
            raise failure
        raise LedgerUnavailable(
            f"ConfigMap {namespace}/{self._maps.name} kept changing: gave up after "
            f"{self._max_attempts} conflicts"
        )

    def _round(self, namespace: str, batch: Sequence[_Pending], active: Sequence[_Pending]) -> bool:
        """Check each charge of ``active`` in order on the stored ledger and write the ones that fit
        in one compare-and-swap, every call ending by the earliest deadline; False when it is to be
        run again (a conflict, or decisions on this replica's copy that no write confirmed).
        A charge already stored (a write whose answer was lost) is not written again; a write of
        the batch whose outcome is unknown is settled by the read, or fenced off by this write."""
        deadline = min((p.deadline for p in active if p.deadline is not None), default=None)
        known = self._written.get(namespace)
        if known is None:
            entries, stored = self._read(namespace, deadline)
        else:
            entries, stored = _decode(known.get("data") or {}), known
        version = _version(stored)
        fence = _settle_unknown(batch, entries, version)
        ledger = _ledger(namespace, entries)
        written = []
        for pending in active:
            if pending.withdraws is not None:
                fence |= _take_back(pending.withdraws, entries, version)
                continue
            pending.result = pending.check(ledger)
            before = entries.get(pending.uid)
            if pending.result is not None or _recorded(pending, before):
                continue
            pending.previous = before
            ledger = ledger.with_charge(namespace, pending.uid, pending.charge)
            entries[pending.uid] = Entry(pending.charge, self._clock(), pending.token)  # empty: a tombstone
            written.append(pending)
        if written or fence:
            return self._write(namespace, entries, stored, deadline, batch, written)
        if known is not None:
            self._written.pop(namespace, None)
            return False  # nothing confirmed the copy: read the ledger and decide again
        return True

    def _write(
        self,
        namespace: str,
        entries: Entries,
        stored: Stored | None,
        deadline: float | None,
        batch: Sequence[_Pending],
        written: Sequence[_Pending],
    ) -> bool:
        """Store the round's entries over ``stored``; False on a conflict. Until the API server
        answers, the outcome of each charge written is unknown (``landing``); once this write is
        stored, no earlier one of the batch over the same version can be. A write that changes no
        entry (a fence) changes an annotation instead: the API server does not store an update that
        changes nothing, and only a stored one moves the resourceVersion."""
        version, base = _version(stored), stored
        if stored is not None and _encode(entries) == (stored.get("data") or {}):
            metadata = stored.get("metadata") or {}
            annotations = {**(metadata.get("annotations") or {}), FENCE: uuid.uuid4().hex[:16]}
            base = {**stored, "metadata": {**metadata, "annotations": annotations}}
        for pending in written:
            pending.landing = version
        self._written.pop(namespace, None)
        try:
            now = self._maps.write(namespace, _encode(entries), base, deadline)
        except Conflict:
            return False  # the ledger moved on: the next read settles what is stored
        except NotAnswered:
            raise
        except LedgerUnavailable:
            for pending in written:
                pending.landing = None  # refused: not stored
            raise
        if now is not None:
            self._written[namespace] = now
        for pending in batch:
            if pending.landing == version:
                pending.landing = None
        for pending in written:
            pending.stored = True
        return True

    def reconcile(self, namespace: str, expected: Ledger, current_as_of: datetime | None = None) -> bool:
        """Make the stored ledger what ``expected`` (computed from a snapshot known current as of
        ``current_as_of``, default now) says: add lost charges, drop released ones, fix changed
        ones; entries the snapshot may not reflect yet (written less than :data:`LANDING` before
        it was current: charges and releases' tombstones) are kept as they are, and older
        tombstones dropped. Returns whether anything was written.

        Counting from the snapshot rather than from now keeps a lagging snapshot from undoing a
        fresh charge, and lets a charge whose release never came (its claim's status write refused
        during a fault) go within seconds, not a fixed minute."""
        for attempt in range(self._max_attempts):
            entries, stored = self._read(namespace)
            now = self._clock()
            settled = min(now, current_as_of or now) - LANDING
            wanted = {uid: dict(c) for uid, c in expected.namespace(namespace).items()}
            fixed: dict[str, Entry] = {}
            for uid, entry in entries.items():
                if entry.at > settled or dict(entry.charge) == wanted.get(uid):
                    fixed[uid] = entry
            for uid, charge in wanted.items():
                fixed.setdefault(uid, Entry(MappingProxyType(charge), now))
            if _encode(fixed) == _encode(entries):
                return False
            self._written.pop(namespace, None)
            try:
                self._maps.write(namespace, _encode(fixed), stored)
                return True
            except Conflict:
                self._backoff(attempt)
        raise LedgerUnavailable(
            f"ConfigMap {namespace}/{self._maps.name} kept changing: reconcile gave up after "
            f"{self._max_attempts} conflicts"
        )


def _in_time(batch: Sequence[_Pending], failure: LedgerUnavailable | None) -> list[_Pending]:
    """The charges of the batch still to be answered that have time for a round and whose request
    is not answered yet; the others are answered unavailable (with the last round's failure, if
    any), so that their deadline does not cut the others' calls short."""
    now = time.monotonic()
    active = []
    for pending in batch:
        if pending.error is None and pending.deadline is not None and pending.deadline - now < MIN_CALL:
            pending.error = failure or LedgerUnavailable("no time left before the webhook answers")
        if pending.error is None and pending.refused() and not pending.stored:
            pending.error = LedgerUnavailable("the webhook answered before the charge was written")
        if pending.error is None and not pending.stored:
            active.append(pending)
    return active


def _recorded(pending: _Pending, entry: Entry | None) -> bool:
    """Whether the ledger already holds what ``pending`` asks: its own write (one whose answer was
    lost), or nothing to release. An equal charge another write stored is written again as this
    one's: taking that other back (its answer did not admit it) must not take this one's."""
    if entry is None:
        return not pending.charge
    return entry.by == pending.token or not (entry.charge or pending.charge)


def _version(stored: Stored | None) -> str:
    return str((stored or {}).get("metadata", {}).get("resourceVersion", "")) if stored is not None else ""


def _settle_unknown(batch: Sequence[_Pending], entries: Entries, version: str) -> bool:
    """Settle the writes of the batch whose outcome was unknown with what the read shows; whether
    one may still be stored later (the ledger is still at the version it was written over, so a
    write now must fence it off)."""
    unsettled = False
    for pending in batch:
        if pending.landing is None:
            continue
        if pending.landing != version:  # the ledger moved on: stored now, or never
            entry = entries.get(pending.uid)
            pending.stored = entry is not None and entry.by == pending.token
            pending.landing = None
        else:
            unsettled = True
    return unsettled


def _take_back(written: _Pending, entries: dict[str, Entry], version: str) -> bool:
    """Restore the entry ``written`` replaced if it is still the one it stored; whether the round
    must write anyway to fence off its write, whose outcome is still unknown."""
    entry = entries.get(written.uid)
    if entry is not None and entry.by == written.token:
        if written.previous is None:
            del entries[written.uid]
        else:
            entries[written.uid] = written.previous
        return True
    return written.landing is not None and written.landing == version


def _fits(ledger: Ledger) -> Exceeded | None:
    """Taking a charge back never exceeds a quota."""
    return None


def _jittered(attempt: int) -> None:
    """Random backoff growing with the attempt, so that contending replicas spread out."""
    time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))


def _ledger(namespace: str, entries: Entries) -> Ledger:
    return Ledger.of(namespace, {uid: entry.charge for uid, entry in entries.items()})


def _decode(data: Mapping[str, str]) -> dict[str, Entry]:
    return {uid: decode_entry(uid, text) for uid, text in data.items()}


def _encode(entries: Entries) -> dict[str, str]:
    return {uid: encode_entry(entry) for uid, entry in sorted(entries.items())}


def with_ledger(rules: Sequence[Rule], store: LedgerStore) -> tuple[Rule, ...]:
    """The rules with the quota rule charging ``store`` (what ``draguard serve`` runs)."""
    return tuple(QuotaRule(store) if isinstance(rule, QuotaRule) else rule for rule in rules)


def reconcile_all(
    store: ApiLedgerStore, snapshot: Snapshot, current_as_of: datetime | None = None
) -> list[str]:
    """Reconcile every namespace that has a folded quota with the snapshot (known current as of
    ``current_as_of``); the namespaces whose ledger was corrected. Run it periodically on a fresh
    snapshot (any replica; writes are CAS)."""
    return [
        ns
        for ns in quota_namespaces(snapshot)
        if store.reconcile(ns, snapshot_ledger(snapshot, ns), current_as_of)
    ]

