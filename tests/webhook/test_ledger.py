"""webhook.ledger: compare-and-swap, replicas and reconcile against the real API server; faults
against a stand-in.

What the real server cannot be made to do on demand (refuse one write with 503, apply a write and
lose its answer, take half a second over one) is done by ``FaultyApiserver``
(``tests/webhook/ledger_standin.py``); everything else talks to the session's kube-apiserver, in a
namespace of this module, whose ledger ConfigMap each test starts without.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane, call
from kubernetes import client
from ledger_recording import RecordingConfigMaps, Seen, namespace_named
from ledger_standin import FaultyApiserver, faulty

from policies.answer import Answer
from policies.api.quantity import Quantity
from policies.quota import Charge, Exceeded, Ledger, LedgerUnavailable
from webhook.ledger import LEDGER_NAME, ApiLedgerStore, ConfigMaps, decode_entry

NS = "ledger-tests"
PATH = f"/api/v1/namespaces/{NS}/configmaps/{LEDGER_NAME}"
ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def cpu(n: str) -> dict[str, Quantity]:
    return {"requests.cpu": Quantity.parse(n)}


def room(limit: int) -> Any:
    """The quota check: ``requests.cpu`` usage plus the claim's new charge within ``limit``."""

    def check_for(uid: str, charge: Charge) -> Any:
        def check(ledger: Ledger) -> Exceeded | None:
            used = ledger.usage(NS).get("requests.cpu", Quantity.from_int(0))
            already = ledger.charged(NS, uid).get("requests.cpu", Quantity.from_int(0))
            asked = charge["requests.cpu"].sub(already)
            if used.add(asked) > Quantity.from_int(limit):
                return Exceeded("q", {"requests.cpu": asked}, {"requests.cpu": used}, cpu(str(limit)))
            return None

        return check

    return check_for


class Real(Seen):
    """The real API server, seen through the ledger clients made by :meth:`store_for`."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__()
        self.api = api

    def store_for(self, read_timeout: float = 1.0, now: datetime = T0) -> ApiLedgerStore:
        maps = RecordingConfigMaps(self.api, self, read_timeout)
        return ApiLedgerStore(maps, clock=lambda: now, backoff=lambda _: None)

    def stored(self) -> dict[str, Any]:
        answer = call(self.api, "GET", PATH)
        assert answer.status == 200, answer.body
        return answer.body


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    with namespace_named(control_plane, NS) as name:
        yield name


@pytest.fixture
def real(control_plane: ControlPlane, namespace: str) -> Iterator[Real]:
    with control_plane.client() as api:
        yield Real(api)
        call(api, "DELETE", PATH)


@pytest.fixture
def apiserver() -> Iterator[FaultyApiserver]:
    with faulty() as server:
        yield server


def faulty_store(server: FaultyApiserver, read_timeout: float = 1.0, now: datetime = T0) -> ApiLedgerStore:
    maps = ConfigMaps(client.ApiClient(client.Configuration(host=server.url)), read_timeout=read_timeout)
    return ApiLedgerStore(maps, clock=lambda: now, backoff=lambda _: None)


def test_first_charge_creates_the_ledger_and_later_ones_replace_it_at_its_version(
    real: Real,
) -> None:
    store, check = real.store_for(), room(10)
    assert store.charge(NS, "uid-1", cpu("4"), check("uid-1", cpu("4"))) is None
    assert store.charge(NS, "uid-2", cpu("2"), check("uid-2", cpu("2"))) is None
    writes = [r for r in real.requests if r[0] in ("POST", "PUT")]
    assert writes == [("POST", f"/api/v1/namespaces/{NS}/configmaps"), ("PUT", PATH)]
    cm = real.stored()
    assert cm["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "draguard"}
    entry = json.loads(cm["data"]["uid-1"])
    # "by": the write that stored it, what taking the charge back looks for
    assert entry == {"charge": {"requests.cpu": "4"}, "at": "2026-11-22T09:00:00Z", "by": entry["by"]}
    assert re.fullmatch("[0-9a-f]{16}", entry["by"]) and entry["by"] != json.loads(cm["data"]["uid-2"])["by"]
    assert store.current(NS).usage(NS) == cpu("6")


def test_replacing_keeps_what_others_added_to_the_configmap(real: Real) -> None:
    store, check = real.store_for(), room(10)
    store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1")))
    cm = real.stored()
    cm["metadata"]["annotations"] = {"team-a/owner": "platform"}
    assert call(real.api, "PUT", PATH, cm).status == 200
    store.charge(NS, "uid-2", cpu("1"), check("uid-2", cpu("1")))
    assert real.stored()["metadata"]["annotations"] == {"team-a/owner": "platform"}
    assert sorted(real.stored()["data"]) == ["uid-1", "uid-2"]


def test_a_charge_that_does_not_fit_writes_nothing(real: Real) -> None:
    store, check = real.store_for(), room(5)
    assert store.charge(NS, "uid-1", cpu("4"), check("uid-1", cpu("4"))) is None
    problem = store.charge(NS, "uid-2", cpu("2"), check("uid-2", cpu("2")))
    assert problem is not None and problem.message() == (
        "exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=5"
    )
    assert real.writes == 1


def test_a_conflicting_write_makes_it_read_and_check_again(real: Real) -> None:
    store, check = real.store_for(), room(5)
    assert store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1"))) is None
    other = real.store_for()

    def replica_b_first(method: str, path: str, body: Any) -> None:
        if method == "PUT" and real.before is not None:
            real.before = None  # once: another replica commits its charge right before ours
            assert other.charge(NS, "uid-b", cpu("3"), check("uid-b", cpu("3"))) is None

    real.before = replica_b_first
    problem = store.charge(NS, "uid-2", cpu("2"), check("uid-2", cpu("2")))
    assert problem is not None and "used: requests.cpu=4" in problem.message()
    assert store.current(NS).usage(NS) == cpu("4")
    assert [m for m, _ in real.requests].count("PUT") == 2  # b's, then our conflicting one


def test_the_next_round_starts_from_the_ledger_as_this_replica_stored_it(real: Real) -> None:
    """One read, then writes only, while no one else writes; a copy gone stale (another replica
    wrote) is refused by the compare-and-swap, and the round reads and checks again."""
    store, other, check = real.store_for(), real.store_for(), room(5)
    assert store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1"))) is None
    assert store.charge(NS, "uid-2", cpu("1"), check("uid-2", cpu("1"))) is None
    assert [m for m, _ in real.requests] == ["GET", "POST", "PUT"]
    assert other.charge(NS, "uid-b", cpu("2"), check("uid-b", cpu("2"))) is None
    del real.requests[:]
    problem = store.charge(NS, "uid-3", cpu("2"), check("uid-3", cpu("2")))
    assert problem is not None and "used: requests.cpu=4" in problem.message()  # b's charge counted
    assert [m for m, _ in real.requests] == ["PUT", "GET"]  # the stale copy's write refused, then read
    assert sorted(store.current(NS).namespace(NS)) == ["uid-1", "uid-2", "uid-b"]


def test_a_refusal_is_never_decided_on_a_copy_no_write_confirmed(real: Real) -> None:
    """Another replica released a charge since this one last wrote: its copy still holds it, and
    would refuse a charge that fits now."""
    store, other, check = real.store_for(), real.store_for(), room(5)
    assert store.charge(NS, "uid-1", cpu("4"), check("uid-1", cpu("4"))) is None
    assert other.charge(NS, "uid-1", {}, lambda ledger: None) is None
    del real.requests[:]
    assert store.charge(NS, "uid-2", cpu("3"), check("uid-2", cpu("3"))) is None
    assert [m for m, _ in real.requests] == ["GET", "PUT"]
    assert store.current(NS).usage(NS) == cpu("3")


def test_a_release_is_never_skipped_on_a_copy_without_the_charge(real: Real) -> None:
    """Another replica charged the claim since this one last wrote: this one's copy has no entry
    to release, the ledger has."""
    store, other, check = real.store_for(), real.store_for(), room(5)
    assert store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1"))) is None
    assert other.charge(NS, "uid-b", cpu("2"), check("uid-b", cpu("2"))) is None
    assert store.charge(NS, "uid-b", {}, lambda ledger: None) is None
    assert store.current(NS).usage(NS) == cpu("1")


def test_releasing_leaves_a_tombstone_that_charges_nothing(real: Real) -> None:
    store, check = real.store_for(), room(5)
    store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1")))
    assert store.charge(NS, "uid-1", {}, lambda ledger: None) is None
    tombstone = json.loads(real.stored()["data"]["uid-1"])
    assert tombstone == {"charge": {}, "at": "2026-11-22T09:00:00Z", "by": tombstone["by"]}
    assert store.current(NS) == Ledger.of(NS, {})
    writes = real.writes
    assert store.charge(NS, "uid-never-charged", {}, lambda ledger: None) is None
    assert real.writes == writes  # nothing to release: nothing written


def test_reconcile_from_a_snapshot_behind_a_release_does_not_put_the_charge_back(
    real: Real,
) -> None:
    """The webhook releases a claim's charge before the API server deletes the claim, so a replica's
    snapshot can still show it reserved a moment later: within the landing time the release stands,
    after it the tombstone goes (and a claim that really is still reserved is charged again)."""
    store = real.store_for()
    store.charge(NS, "uid-1", cpu("1"), lambda ledger: None)
    store.charge(NS, "uid-1", {}, lambda ledger: None)
    stale = Ledger.of(NS, {"uid-1": cpu("1")})
    assert not real.store_for(now=T0 + timedelta(seconds=10)).reconcile(NS, stale)
    assert store.current(NS) == Ledger.of(NS, {})
    later = real.store_for(now=T0 + timedelta(minutes=2))
    assert later.reconcile(NS, Ledger())
    assert real.stored().get("data", {}) == {}  # the API server drops an empty data map


def test_reconcile_counts_the_landing_time_from_when_its_snapshot_was_current(real: Real) -> None:
    """A charge whose release never came (the claim's status write refused during a fault) goes
    once the snapshot, current after the charge had time to land, no longer shows it; a snapshot
    that was last current before that (a lagging watch) leaves it alone however late it is judged."""
    real.store_for().charge(NS, "uid-1", cpu("1"), lambda ledger: None)
    later = real.store_for(now=T0 + timedelta(seconds=40))
    assert not later.reconcile(NS, Ledger(), current_as_of=T0 + timedelta(seconds=15))
    assert later.current(NS).usage(NS) == cpu("1")
    assert later.reconcile(NS, Ledger(), current_as_of=T0 + timedelta(seconds=25))
    assert later.current(NS).usage(NS) == {}


def test_reconcile_restores_lost_charges_and_fixes_changed_ones(real: Real) -> None:
    store = real.store_for()
    store.charge(NS, "uid-old", cpu("3"), lambda ledger: None)
    later = real.store_for(now=T0 + timedelta(minutes=5))
    expected = Ledger.of(NS, {"uid-old": cpu("1"), "uid-lost": cpu("2")})
    assert later.reconcile(NS, expected)
    assert later.current(NS) == expected
    assert not later.reconcile(NS, expected)  # nothing to do: no write
    assert real.writes == 2


# --- faults -----------------------------------------------------------------------------------------


def test_a_refused_write_is_tried_again_and_charges_once(apiserver: FaultyApiserver) -> None:
    store, check = faulty_store(apiserver), room(5)
    apiserver.faults = ["drop"]
    assert store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1")), time.monotonic() + 2) is None
    assert apiserver.writes == 2
    assert store.current(NS).usage(NS) == cpu("1")


def test_a_write_refused_until_the_deadline_is_unavailable_and_charges_nothing(
    apiserver: FaultyApiserver,
) -> None:
    store, check = faulty_store(apiserver), room(5)
    apiserver.faults = ["drop"] * 1000
    with pytest.raises(LedgerUnavailable, match="HTTP 503: etcdserver: leader changed"):
        store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1")), time.monotonic() + 0.3)
    apiserver.faults = []
    assert store.current(NS).usage(NS) == {}
    assert store.charge(NS, "uid-1", cpu("1"), check("uid-1", cpu("1"))) is None  # the client's retry
    assert store.current(NS).usage(NS) == cpu("1")


def test_lost_answer_is_noticed_and_a_retry_never_charges_twice(apiserver: FaultyApiserver) -> None:
    store, check = faulty_store(apiserver), room(5)
    apiserver.faults = ["lose"]
    assert store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2"))) is None  # it landed
    assert apiserver.writes == 1  # the next round's read found it: not written again
    # The client's retry is another request: its charge is stored as its own (taking back the first
    # request's must not take back this one's), and still counted once.
    assert store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2"))) is None
    assert apiserver.writes == 2
    assert store.current(NS).usage(NS) == cpu("2")


def test_delayed_write_times_out_lands_later_and_reconcile_heals_it(apiserver: FaultyApiserver) -> None:
    store, check = faulty_store(apiserver), room(5)
    apiserver.faults, apiserver.delay_seconds = ["delay"], 0.5
    with pytest.raises(LedgerUnavailable, match="Read timed out"):  # and no time left for another round
        store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2")), time.monotonic() + 0.2)
    deadline = time.monotonic() + 3
    while not store.current(NS).usage(NS) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.current(NS).usage(NS) == cpu("2")  # the write landed after the client gave up
    # The claim was never reserved (the request was answered per the failure policy): the snapshot
    # does not have it. Within the landing time reconcile keeps it, afterwards it is removed.
    assert not faulty_store(apiserver, now=T0 + timedelta(seconds=10)).reconcile(NS, Ledger())
    assert faulty_store(apiserver, now=T0 + timedelta(minutes=2)).reconcile(NS, Ledger())
    assert store.current(NS).usage(NS) == {}


def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_a_write_that_may_land_after_its_answer_went_out_is_fenced_off(apiserver: FaultyApiserver) -> None:
    """The write timed out and the webhook answered without it; the API server stores it only
    later. Taking it back finds nothing yet, so it writes over the same resourceVersion first: the
    late write then fails on its resourceVersion and never holds quota (issue 30's phantoms)."""
    store, check, answer = faulty_store(apiserver), room(5), Answer()
    apiserver.faults, apiserver.delay_seconds = ["none", "delay"], 0.6
    assert store.charge(NS, "uid-0", cpu("1"), check("uid-0", cpu("1"))) is None  # the ledger exists
    with pytest.raises(LedgerUnavailable, match="Read timed out"):
        store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2")), time.monotonic() + 0.2, answer)
    answer.settle(admitted=False)
    wait_until(lambda: apiserver.answered == 3)  # the fence, then the late write, refused
    assert apiserver.writes == 3
    assert store.current(NS).usage(NS) == cpu("1")
    assert "draguard.io/ledger-fence" in faulty_store(apiserver)._maps.read(NS)[1]["metadata"]["annotations"]


def test_a_charge_whose_answer_went_out_before_its_write_is_never_written(real: Real) -> None:
    store, check, answer = real.store_for(), room(5), Answer()
    answer.settle(admitted=False)
    with pytest.raises(LedgerUnavailable, match="the webhook answered before the charge was written"):
        store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2")), time.monotonic() + 2, answer)
    assert real.writes == 0


def test_a_charge_taken_back_restores_what_it_replaced_unless_rewritten_since(real: Real) -> None:
    store, check = real.store_for(), room(10)
    assert store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2"))) is None
    grown, retried = Answer(), Answer()
    assert store.charge(NS, "uid-1", cpu("4"), check("uid-1", cpu("4")), answer=grown) is None
    assert store.charge(NS, "uid-2", cpu("1"), check("uid-2", cpu("1")), answer=retried) is None
    assert store.charge(NS, "uid-2", cpu("1"), check("uid-2", cpu("1"))) is None  # a retry, admitted
    writes = real.writes
    grown.settle(admitted=False)
    retried.settle(admitted=False)  # its charge was stored again by the retry: that one stays
    wait_until(lambda: real.writes == writes + 1 and store.current(NS).usage(NS) == cpu("3"))
    assert store.current(NS).namespace(NS) == {"uid-1": cpu("2"), "uid-2": cpu("1")}


def test_every_call_of_a_charge_ends_by_its_deadline(apiserver: FaultyApiserver) -> None:
    """A write slower than the time left is given up at the deadline (not at the 1 s read timeout),
    and is not re-read afterwards: the webhook has answered by then, per its failure policy."""
    store, check = faulty_store(apiserver), room(5)
    apiserver.faults, apiserver.delay_seconds = ["delay"], 0.6
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable, match="Read timed out"):
        store.charge(NS, "uid-1", cpu("2"), check("uid-1", cpu("2")), deadline=started + 0.3)
    assert time.monotonic() - started < 0.55
    assert apiserver.writes == 1
    with pytest.raises(LedgerUnavailable, match="no time left before the webhook answers"):
        store.charge(NS, "uid-2", cpu("1"), check("uid-2", cpu("1")), deadline=time.monotonic())
    # out of time before it started: not even a read (only the first charge's one)
    assert [method for method, _ in apiserver.requests].count("GET") == 1
    assert apiserver.writes == 1


def test_damaged_entries_are_an_error_naming_the_key() -> None:
    with pytest.raises(LedgerUnavailable, match="data key uid-x is not a draguard charge"):
        decode_entry("uid-x", '{"charge": {"requests.cpu": "lots"}, "at": "2026-11-22T09:00:00Z"}')


# --- batching within a replica ----------------------------------------------------------------------


def test_one_replica_batches_concurrent_charges_and_never_conflicts_with_itself(real: Real) -> None:
    maps = RecordingConfigMaps(real.api, real)
    store, check = ApiLedgerStore(maps, clock=lambda: T0), room(20)
    with ThreadPoolExecutor(16) as pool:
        answers = list(
            pool.map(lambda i: store.charge(NS, f"uid-{i}", cpu("1"), check(f"uid-{i}", cpu("1"))), range(50))
        )
    assert sum(a is None for a in answers) == 20
    assert store.current(NS).usage(NS) == cpu("20")
    assert maps.conflicts == 0
    assert real.writes < 20  # batched: fewer writes than charges


def queued(store: ApiLedgerStore, count: int) -> None:
    """Wait until ``count`` charges wait for the namespace's next batch."""
    deadline = time.monotonic() + 10
    while len(store._waiting.get(NS, [])) < count:
        assert time.monotonic() < deadline, "the charges did not queue"
        time.sleep(0.005)


def charging(pool: ThreadPoolExecutor, store: ApiLedgerStore, uids: list[str], **more: Any) -> list[Any]:
    check = room(100)
    return [pool.submit(store.charge, NS, uid, cpu("1"), check(uid, cpu("1")), **more) for uid in uids]


def test_charges_arriving_during_a_write_are_stored_together_in_the_next_one(real: Real) -> None:
    """Group commit: ten reservations arriving while the first is being written take one more
    write, not ten, and each is answered once that write is stored."""
    store = real.store_for()
    later = [f"uid-{i}" for i in range(1, 11)]
    with ThreadPoolExecutor(11) as pool:

        def ten_arrive(method: str, path: str, body: Any) -> None:
            if method == "POST" and real.before is not None:
                real.before = None
                waiting.extend(charging(pool, store, later))
                queued(store, len(later))

        waiting: list[Any] = []
        real.before = ten_arrive
        assert charging(pool, store, ["uid-0"])[0].result() is None
        assert [future.result() for future in waiting] == [None] * 10
    assert [m for m, _ in real.requests if m in ("POST", "PUT")] == ["POST", "PUT"]
    assert store.current(NS).usage(NS) == cpu("11")


def test_a_conflict_retries_the_batch_with_the_charges_that_arrived_meanwhile(real: Real) -> None:
    store, other = real.store_for(), real.store_for()
    store.charge(NS, "uid-0", cpu("1"), lambda ledger: None)
    later = ["uid-2", "uid-3", "uid-4"]
    with ThreadPoolExecutor(4) as pool:

        def replica_b_and_three_more(method: str, path: str, body: Any) -> None:
            if method == "PUT" and real.before is not None:
                real.before = None  # another replica commits right before ours, and three more arrive
                assert other.charge(NS, "uid-b", cpu("1"), lambda ledger: None) is None
                waiting.extend(charging(pool, store, later))
                queued(store, len(later))

        waiting: list[Any] = []
        real.before = replica_b_and_three_more
        assert charging(pool, store, ["uid-1"])[0].result() is None
        assert [future.result() for future in waiting] == [None] * 3
    puts = [m for m, _ in real.requests if m == "PUT"]
    assert len(puts) == 3  # b's, our conflicting one, then ours again holding all four
    assert sorted(store.current(NS).namespace(NS)) == ["uid-0", "uid-1", "uid-2", "uid-3", "uid-4", "uid-b"]


def test_a_charge_out_of_time_is_left_out_and_the_rest_of_its_batch_is_written(real: Real) -> None:
    store = real.store_for()
    with ThreadPoolExecutor(3) as pool:
        due = time.monotonic() + 0.2

        def two_arrive_and_time_passes(method: str, path: str, body: Any) -> None:
            if method == "POST" and real.before is not None:
                real.before = None
                waiting.extend(charging(pool, store, ["uid-due"], deadline=due))
                waiting.extend(charging(pool, store, ["uid-later"], deadline=time.monotonic() + 5))
                queued(store, 2)
                while time.monotonic() < due:  # the first write is slow: uid-due's time runs out
                    time.sleep(0.01)

        waiting: list[Any] = []
        real.before = two_arrive_and_time_passes
        assert charging(pool, store, ["uid-first"])[0].result() is None
        with pytest.raises(LedgerUnavailable, match="no time left before the webhook answers"):
            waiting[0].result()
        assert waiting[1].result() is None
    assert sorted(store.current(NS).namespace(NS)) == ["uid-first", "uid-later"]


def test_a_failing_check_fails_its_batch_without_leaving_anyone_waiting(real: Real) -> None:
    store = real.store_for()

    def broken(ledger: Ledger) -> Exceeded | None:
        raise KeyError("requests.cpu")

    with pytest.raises(LedgerUnavailable, match="KeyError"):
        store.charge(NS, "uid-1", cpu("1"), broken)
    assert store.charge(NS, "uid-2", cpu("1"), lambda ledger: None) is None  # the namespace is free again


# --- two replicas, 200 concurrent charges, room for 100 -----------------------------------------------

REPLICA = textwrap.dedent("""
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from policies.api.quantity import Quantity
    from policies.quota import Exceeded, LedgerUnavailable
    from webhook.kube import connect
    from webhook.ledger import ApiLedgerStore, ConfigMaps

    kubeconfig, namespace, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    api = connect(kubeconfig, in_cluster=False)
    store = ApiLedgerStore(ConfigMaps(api))
    one = {"requests.cpu": Quantity.from_int(1)}

    def check(ledger):
        used = ledger.usage(namespace).get("requests.cpu", Quantity.from_int(0))
        return None if used.add(one["requests.cpu"]) <= Quantity.from_int(100) else Exceeded("q", one, {}, {})

    def admit(i):
        for _ in range(20):  # the scheduler retries a reservation the webhook could not decide
            try:
                return store.charge(namespace, f"uid-{i}", one, check) is None
            except LedgerUnavailable:
                continue
        return False

    claims = range(first, first + count)
    with ThreadPoolExecutor(16) as pool:
        admitted = [i for i, ok in zip(claims, pool.map(admit, claims)) if ok]
    print(" ".join(map(str, admitted)))
""")


def test_two_replicas_never_overcommit(real: Real, control_plane: ControlPlane) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    replicas = [
        subprocess.Popen(
            [sys.executable, "-c", REPLICA, str(control_plane.admin_kubeconfig), NS, str(first), "100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for first in (0, 100)
    ]
    admitted: list[str] = []
    for replica in replicas:
        out, err = replica.communicate(timeout=60)
        assert replica.returncode == 0, err
        admitted += [f"uid-{i}" for i in out.split()]
    assert len(admitted) == 100
    ledger = real.store_for().current(NS)
    assert sorted(ledger.namespace(NS)) == sorted(admitted)
    assert ledger.usage(NS) == cpu("100")
