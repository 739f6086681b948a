"""Quota folding: policies.quota arithmetic and the quota rule on claim status updates and pod creates.

Expected numbers are worked out by hand from the fixtures (node_allocatable_fixtures) and upstream's
quota wording (``exceeded quota: <name>, requested: ..., used: ..., limited: ...``).
"""

from __future__ import annotations

from typing import Any

import pytest
from node_allocatable_fixtures import (
    NS,
    claim,
    container,
    node_cluster,
    pod,
    quota,
    request,
    reserve,
    template,
)
from rule_fixtures import admission, cluster, context

from policies.answer import Answer
from policies.api.core import Pod, ResourceQuota
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.api.resource import DeviceClass, ResourceClaim
from policies.footprint import ClaimFootprint, ClaimUse
from policies.quota import (
    ChargeMemo,
    Ledger,
    LedgerUnavailable,
    MemoryLedgerStore,
    claim_charge,
    claim_object_usage,
    dra_charge,
    first_exceeded,
    limits_keys,
    requests_keys,
    smallest,
)
from policies.rules.engine import RuleUnavailable, decide
from policies.rules.quota import QuotaRule
from policies.rules.registry import RULES
from policies.snapshot import Snapshot

Q = Quantity.parse


def q(**amounts: str) -> dict[str, Quantity]:
    return {k.replace("__", ".").replace("_", "-"): Q(v) for k, v in amounts.items()}


# --- pure arithmetic --------------------------------------------------------------------------------


def claim_spec(*requests: dict[str, Any]) -> ResourceClaim:
    return ResourceClaim.model_validate({"spec": {"devices": {"requests": list(requests)}}})


def test_device_counts_follow_upstream_counting_rules() -> None:
    # dra-reference 6.1: exactly 2 gpu + firstAvailable [4 gpu, 8 gpu-small] => gpu 6, gpu-small 8.
    spec = claim_spec(
        {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}},
        {
            "name": "b",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 4},
                {"name": "small", "deviceClassName": "gpu-small", "allocationMode": "ExactCount", "count": 8},
            ],
        },
        {"name": "c", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}},
        {"name": "d", "exactly": {"deviceClassName": "nic"}},  # not defaulted yet: one device
    )
    assert claim_object_usage(spec.spec.devices, {}) == {
        "count/resourceclaims.resource.k8s.io": Q("1"),
        "gpu.deviceclass.resource.k8s.io/devices": Q("6"),
        "gpu-small.deviceclass.resource.k8s.io/devices": Q("8"),
        "nic.deviceclass.resource.k8s.io/devices": Q("33"),
    }


def test_device_counts_under_extended_resource_names_of_existing_classes() -> None:
    cls = DeviceClass.model_validate(
        {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}
    )
    spec = claim_spec(
        {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}
    )
    usage = claim_object_usage(spec.spec.devices, {"gpu": cls})
    assert usage["requests.deviceclass.resource.kubernetes.io/gpu"] == Q("2")
    assert usage["requests.example.com/gpu"] == Q("2")


def test_resources_map_to_the_quota_names_upstream_uses() -> None:
    assert requests_keys(q(cpu="1", memory="1Gi", ephemeral_storage="1Gi", hugepages_2Mi="2Mi")) == q(
        cpu="1",
        requests__cpu="1",
        memory="1Gi",
        requests__memory="1Gi",
        ephemeral_storage="1Gi",
        requests__ephemeral_storage="1Gi",
        requests__hugepages_2Mi="2Mi",
    )
    assert limits_keys(q(cpu="2", hugepages_2Mi="2Mi")) == q(limits__cpu="2")


def bare_pod(**spec: Any) -> Pod:
    return Pod.model_validate({"spec": {"containers": [{"name": "main", **spec.pop("main", {})}], **spec}})


def test_dra_charge_is_what_the_claim_adds_to_the_pod() -> None:
    use = ClaimUse(ClaimFootprint(q(cpu="4")), ("main",))
    assert dra_charge(bare_pod(), use) == q(cpu="4", requests__cpu="4")
    limited = bare_pod(main={"resources": {"limits": {"cpu": "1"}}})
    assert dra_charge(limited, use) == q(cpu="4", requests__cpu="4", limits__cpu="4")
    # Pod-level requests absorb DRA amounts (upstream PodRequests): nothing more to charge.
    assert dra_charge(bare_pod(resources={"requests": {"cpu": "8"}}), use) == {}


def rq(name: str, hard: dict[str, str], used: dict[str, str], **spec: Any) -> ResourceQuota:
    obj = decode(quota(name, hard, used, **spec))
    assert isinstance(obj, ResourceQuota)
    return obj


def test_first_exceeded_uses_upstream_wording_and_only_limited_raised_keys() -> None:
    quotas = [
        rq("b-quota", {"requests.cpu": "100"}, {"requests.cpu": "0"}),
        rq(
            "team-a-quota",
            {"requests.cpu": "12", "requests.memory": "1Gi", "pods": "1"},
            {"requests.cpu": "8", "pods": "5"},
        ),
    ]
    found = first_exceeded(quotas, q(requests__cpu="4", limits__cpu="4"), q(requests__cpu="2"))
    assert found is not None
    assert found.message() == (
        "exceeded quota: team-a-quota, requested: requests.cpu=4, used: requests.cpu=10, "
        "limited: requests.cpu=12"
    )
    assert first_exceeded(quotas, q(requests__cpu="4"), {}) is None  # 8 + 4 = 12 fits exactly


def test_scoped_quotas_are_not_folded() -> None:
    scoped = rq("scoped", {"requests.cpu": "1"}, {}, scopes=["BestEffort"])
    assert first_exceeded([scoped], q(requests__cpu="4"), {}) is None


def test_hard_comes_from_status_and_spec_until_synced() -> None:
    # Upstream compares with status.hard: a spec raised to 100 counts once the controller syncs it.
    raised = ResourceQuota.model_validate(
        {
            "metadata": {"name": "x"},
            "spec": {"hard": {"requests.cpu": "100"}},
            "status": {"hard": {"requests.cpu": "1"}},
        }
    )
    assert first_exceeded([raised], q(requests__cpu="2"), {}) is not None
    unsynced = ResourceQuota.model_validate(
        {"metadata": {"name": "y"}, "spec": {"hard": {"requests.cpu": "1"}}}
    )
    assert first_exceeded([unsynced], q(requests__cpu="2"), {}) is not None


def test_ledger_replaces_and_removes_charges_by_claim_uid() -> None:
    ledger = (
        Ledger()
        .with_charge("a", "u1", q(cpu="1"))
        .with_charge("a", "u2", q(cpu="2"))
        .with_charge("b", "u3", q(cpu="5"))
    )
    assert ledger.usage("a") == q(cpu="3")
    ledger = ledger.with_charge("a", "u1", q(cpu="4")).with_charge("a", "u2", {})
    assert ledger.usage("a") == q(cpu="4") and ledger.usage("b") == q(cpu="5")
    assert dict(ledger.namespace("a")) == {"u1": q(cpu="4")}


def test_smallest_is_the_per_key_minimum() -> None:
    assert smallest(
        [q(cpu="4", memory="1Gi"), q(cpu="2", memory="2Gi"), q(cpu="3", memory="1Gi", x="1")]
    ) == q(cpu="2", memory="1Gi")
    assert smallest([]) == {}


# --- the rule on ResourceClaim status updates --------------------------------------------------------

CPU_QUOTA = {"requests.cpu": "12"}
FREE_CORES = claim(
    "cores",
    request("cores", "cpu", capacity="4"),
    devices=("cpu/socket0",),
    consumed={"cpu.example.com/cpu": "4"},
)
POD_B = pod("b", container("main", "c", cpu="1"), claims={"c": "cores"})
QUOTA_MESSAGE = (
    "deny: claim team-a/cores cannot be reserved for pod team-a/b: draguard charges the node-allocatable "
    "resources of its devices to the namespace's quota, and exceeded quota: team-a-quota, requested: "
)


def status_update(
    new: dict[str, Any],
    old: dict[str, Any],
    snapshot: Snapshot,
    rule: QuotaRule | None = None,
    dry_run: bool = False,
) -> list[str]:
    req = admission(new, operation="UPDATE", old=old, sub_resource="status")
    if dry_run:
        req = req._replace(dry_run=True)
    rule = rule or QuotaRule()
    ctx = context(snapshot)
    assert rule.applies(req, ctx)
    return [f"{f.action}: {f.message}" for f in rule.check(req, ctx)]


def test_reservation_over_quota_is_denied_with_upstream_numbers() -> None:
    snapshot = node_cluster(FREE_CORES, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "10"}))
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot) == [
        QUOTA_MESSAGE + "requests.cpu=4, used: requests.cpu=10, limited: requests.cpu=12"
    ]


def test_reservation_within_quota_is_allowed() -> None:
    snapshot = node_cluster(FREE_CORES, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "8"}))
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot) == []


def test_used_includes_the_ledger_of_other_allocated_claims() -> None:
    held = claim(
        "held",
        request("cores", "cpu", capacity="2"),
        devices=("cpu/socket0",),
        consumed={"cpu.example.com/cpu": "2"},
        reserved=("a",),
        node="node-2",
    )
    snapshot = node_cluster(held, FREE_CORES, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "7"}))
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot) == [
        QUOTA_MESSAGE + "requests.cpu=4, used: requests.cpu=9, limited: requests.cpu=12"
    ]


def test_hugepages_from_a_1_36_mapping() -> None:
    huge = claim("cores", request("hp", "mem"), devices=("mem/hp-0",))
    snapshot = node_cluster(
        huge,
        POD_B,
        quota("team-a-quota", {"requests.hugepages-2Mi": "1Gi"}, {"requests.hugepages-2Mi": "512Mi"}),
    )
    assert status_update(reserve(huge, "b"), huge, snapshot) == [
        QUOTA_MESSAGE + "requests.hugepages-2Mi=1Gi, used: requests.hugepages-2Mi=512Mi, "
        "limited: requests.hugepages-2Mi=1Gi"
    ]


def test_multi_pod_claims_charge_each_pod_its_own_overhead_and_limits_where_declared() -> None:
    gpu = claim("cores", request("gpu", "gpu"), devices=("gpu/gpu-0",), reserved=("a",))
    pod_a = pod("a", container("main", "c"), claims={"c": "cores"})
    pod_b = pod("b", container("x", "c"), container("y", "c"), claims={"c": "cores"})
    pod_b["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}
    hard = {"requests.memory": "10Gi", "limits.memory": "1Gi"}
    snapshot = node_cluster(gpu, pod_a, pod_b, quota("team-a-quota", hard, {"requests.memory": "0"}))
    # Pod b: 1Gi per pod + 2 x 512Mi = 2Gi requested; its memory limit is declared, so limits too.
    assert status_update(reserve(gpu, "b"), gpu, snapshot) == [
        "deny: claim team-a/cores cannot be reserved for pod team-a/a, pod team-a/b: draguard charges the "
        "node-allocatable resources of its devices to the namespace's quota, and exceeded quota: "
        "team-a-quota, requested: limits.memory=2Gi, used: limits.memory=0, limited: limits.memory=1Gi"
    ]


def test_status_writes_that_change_no_charge_are_not_judged() -> None:
    taken = reserve(FREE_CORES, "b")
    snapshot = node_cluster(taken, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "12"}))
    assert (
        status_update({**taken, "metadata": {**taken["metadata"], "labels": {"x": "y"}}}, taken, snapshot)
        == []
    )


def test_pod_level_requests_absorb_the_claim() -> None:
    absorbing = pod("b", container("main", "c"), claims={"c": "cores"}, resources={"requests": {"cpu": "8"}})
    snapshot = node_cluster(FREE_CORES, absorbing, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "12"}))
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot) == []


# --- the shared ledger interface ---------------------------------------------------------------------


MORE_CORES = claim(
    "more",
    request("cores", "cpu", capacity="4"),
    devices=("cpu/socket0",),
    consumed={"cpu.example.com/cpu": "4"},
)
POD_C = pod("c", container("main", "c"), claims={"c": "more"})


def test_with_a_store_the_charge_is_checked_against_and_recorded_in_the_shared_ledger() -> None:
    snapshot = node_cluster(FREE_CORES, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "4"}))
    store = MemoryLedgerStore(Ledger().with_charge(NS, "uid-elsewhere", q(requests__cpu="4")))
    rule = QuotaRule(store)
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot, rule) == []
    assert store.ledger.charged(NS, "uid-cores") == q(cpu="4", requests__cpu="4")
    # status.used 4 + the shared ledger's 8 (not the snapshot's 0): no room for 4 more CPUs.
    snapshot = node_cluster(
        FREE_CORES, MORE_CORES, POD_B, POD_C, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "4"})
    )
    found = status_update(reserve(MORE_CORES, "c"), MORE_CORES, snapshot, rule)
    assert found and found[0].endswith(
        "requested: requests.cpu=4, used: requests.cpu=12, limited: requests.cpu=12"
    )


def test_a_release_the_api_server_never_stored_counts_while_the_snapshot_shows_it_reserved() -> None:
    """The ledger took the release of uid-cores when the webhook admitted it, but the API server
    restarted before storing it: the claim is still reserved for b, holding 4 CPUs. Counting the
    ledger alone left room for 4 more (issue 25's soak overcommitted a quota of 6 so)."""
    still_reserved = reserve(FREE_CORES, "b")
    snapshot = node_cluster(
        still_reserved, MORE_CORES, POD_B, POD_C, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "4"})
    )
    store = MemoryLedgerStore(Ledger().with_charge(NS, "uid-elsewhere", q(requests__cpu="4")))
    found = status_update(reserve(MORE_CORES, "c"), MORE_CORES, snapshot, QuotaRule(store))
    assert found and found[0].endswith(
        "requested: requests.cpu=4, used: requests.cpu=12, limited: requests.cpu=12"
    )
    assert store.ledger.charged(NS, "uid-more") == {}


def test_a_remembered_charge_is_worked_out_again_when_a_reserved_pod_changes() -> None:
    """The quota rule remembers claims' charges across snapshots (:class:`ChargeMemo`); a pod whose
    record changed (pod-level requests that absorb the claim's CPUs) must not get the old charge."""
    first = node_cluster(reserve(FREE_CORES, "b"), POD_B)
    taken = first.claims[(NS, "cores")]
    absorbing = pod(
        "b", container("main", "c", cpu="1"), claims={"c": "cores"}, resources={"requests": {"cpu": "8"}}
    )
    second = node_cluster(taken, absorbing)
    memo, devices = ChargeMemo(), first.devices
    for snapshot in (first, second, first):
        assert memo.charge(taken, devices, snapshot.pods) == claim_charge(taken, devices, snapshot.pods)
    assert memo.charge(taken, devices, first.pods) != memo.charge(taken, devices, second.pods)


def test_the_memo_forgets_the_claims_a_snapshot_no_longer_holds_as_they_were() -> None:
    """Each remembered charge keeps its claim object alive, and every reservation makes a new one:
    where slices seldom change (the device index with them), the memo kept every version ever
    charged. Past twice the snapshot's claims (and a slack) only the snapshot's own are kept."""
    snapshot = node_cluster(reserve(FREE_CORES, "b"), POD_B)
    taken = snapshot.claims[(NS, "cores")]
    memo = ChargeMemo()
    memo.SLACK = 1
    older = [taken.model_copy() for _ in range(3)]  # the same claim as it was before
    for version in (*older, taken):
        memo.charge(version, snapshot.devices, snapshot.pods)
    memo.forget_outside(snapshot.claims)
    assert [known[0] for known in memo._known.values()] == [taken]
    memo.charge(older[0], snapshot.devices, snapshot.pods)
    memo.forget_outside(snapshot.claims)  # within twice the snapshot's and the slack: kept
    assert len(memo._known) == 2


def test_dry_run_requests_are_checked_but_never_charged() -> None:
    snapshot = node_cluster(FREE_CORES, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "6"}))
    store = MemoryLedgerStore()
    assert status_update(reserve(FREE_CORES, "b"), FREE_CORES, snapshot, QuotaRule(store), dry_run=True) == []
    assert store.ledger == Ledger()


def test_deleting_or_deallocating_a_claim_releases_its_charge() -> None:
    taken = reserve(FREE_CORES, "b")
    store = MemoryLedgerStore(Ledger().with_charge(NS, "uid-cores", q(requests__cpu="4")))
    rule = QuotaRule(store)
    snapshot = node_cluster(taken, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "6"}))
    deallocated = {k: v for k, v in taken.items() if k != "status"}
    assert status_update(deallocated, taken, snapshot, rule) == []
    assert store.ledger.usage(NS) == {}
    store.ledger = Ledger().with_charge(NS, "uid-cores", q(requests__cpu="4"))
    delete = admission(None, operation="DELETE", old=taken)
    assert rule.applies(delete, context(snapshot)) and rule.check(delete, context(snapshot)) == []
    assert store.ledger.usage(NS) == {}
    assert not QuotaRule().applies(delete, context(snapshot))  # offline: nothing to release


def test_a_delete_that_finalizers_only_mark_keeps_the_charge_until_the_reservation_is_cleared() -> None:
    """The garbage collector deletes a deleted pod's claim while the claim is still reserved for it
    and carries the scheduler's delete-protection finalizer: the claim stays, its devices held, until
    the resourceclaim controller clears reservedFor. Releasing the charge at the DELETE let new
    reservations take the same cores meanwhile (issue 25's soak: 8 cores held under a quota of 6)."""
    taken = reserve(FREE_CORES, "b")
    taken["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    store = MemoryLedgerStore(Ledger().with_charge(NS, "uid-cores", q(cpu="4", requests__cpu="4")))
    rule = QuotaRule(store)
    snapshot = node_cluster(taken, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "6"}))
    delete = admission(None, operation="DELETE", old=taken)
    assert not rule.applies(delete, context(snapshot))  # nothing to check, nothing to wait for
    assert store.ledger.charged(NS, "uid-cores") == q(cpu="4", requests__cpu="4")
    marked = {**taken, "metadata": {**taken["metadata"], "deletionTimestamp": "2026-11-29T04:20:50Z"}}
    released = {**marked, "status": {**taken["status"], "reservedFor": []}}
    assert status_update(released, marked, snapshot, rule) == []
    assert store.ledger.usage(NS) == {}
    gone = {**taken, "metadata": {k: v for k, v in taken["metadata"].items() if k != "finalizers"}}
    assert rule.applies(admission(None, operation="DELETE", old=gone), context(snapshot))


def test_a_charge_whose_answer_did_not_admit_it_is_taken_back_unless_charged_again_since() -> None:
    store = MemoryLedgerStore(Ledger().with_charge(NS, "uid-a", q(requests__cpu="2")))
    fits = lambda ledger: None  # noqa: E731
    grown, fresh, admitted = Answer(), Answer(), Answer()
    assert store.charge(NS, "uid-a", q(requests__cpu="4"), fits, answer=grown) is None
    assert store.charge(NS, "uid-b", q(requests__cpu="1"), fits, answer=fresh) is None
    assert store.charge(NS, "uid-c", q(requests__cpu="1"), fits, answer=admitted) is None
    assert store.charge(NS, "uid-b", q(requests__cpu="1"), fits) is None  # charged again since
    grown.settle(admitted=False)  # the deadline answered, or another rule denied
    fresh.settle(admitted=False)
    admitted.settle(admitted=True)
    assert store.ledger.namespace(NS) == {
        "uid-a": q(requests__cpu="2"), "uid-b": q(requests__cpu="1"), "uid-c": q(requests__cpu="1")
    }  # fmt: skip


class DownStore:
    """A ledger that cannot be reached."""

    def charge(self, *_: Any) -> None:
        raise LedgerUnavailable("GET /api/v1/namespaces/team-a/configmaps/draguard-quota-ledger: timed out")


def test_releases_pass_without_a_ledger_or_a_fresh_snapshot_and_charges_fail_closed() -> None:
    """Deleting or deallocating a claim cannot overcommit a quota: it must never be refused because
    the ledger or the snapshot is unavailable (reconcile drops the charge later). A new charge is."""
    taken = reserve(FREE_CORES, "b")
    snapshot = node_cluster(taken, POD_B, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "6"}))
    rule = QuotaRule(DownStore())  # type: ignore[arg-type]
    delete = admission(None, operation="DELETE", old=taken)
    deallocate = admission({k: v for k, v in taken.items() if k != "status"}, operation="UPDATE", old=taken,
                           sub_resource="status")
    for release in (delete, deallocate):
        for fresh in (True, False):
            assert rule.check(release, context(snapshot, fresh=fresh)) == []
    both = reserve(FREE_CORES, "b", "c")
    one_gone = admission(taken, operation="UPDATE", old=both, sub_resource="status")
    assert rule.check(one_gone, context(snapshot, fresh=False)) == []
    reservation = admission(taken, operation="UPDATE", old=FREE_CORES, sub_resource="status")
    one_more = admission(both, operation="UPDATE", old=taken, sub_resource="status")
    for charged in (reservation, one_more):
        with pytest.raises(RuleUnavailable, match="ledger is unavailable"):
            rule.check(charged, context(snapshot))
        with pytest.raises(RuleUnavailable, match="snapshot is stale"):
            rule.check(charged, context(snapshot, fresh=False))


# --- the rule on Pod CREATE --------------------------------------------------------------------------


def pod_create(obj: dict[str, Any], snapshot: Snapshot) -> list[str]:
    req, ctx = admission(obj), context(snapshot)
    rule = QuotaRule()
    assert rule.applies(req, ctx)
    return [f"{f.action}: {f.message}" for f in rule.check(req, ctx)]


CORES_TEMPLATE = template("cores", request("cores", "cpu", capacity="4"))
TEMPLATE_POD = pod("p", container("main", "c", cpu="1"), templates={"c": "cores"})


def test_pod_that_can_never_fit_is_refused_with_the_smallest_footprint() -> None:
    snapshot = node_cluster(CORES_TEMPLATE, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "10"}))
    assert pod_create(TEMPLATE_POD, snapshot) == [
        "deny: pod team-a/p can never fit its namespace's quota on any node where its claims fit (node-1, "
        "node-2), counting the node-allocatable resources of its DRA devices and the devices of the claims "
        "its templates create: exceeded quota: team-a-quota, requested: requests.cpu=5, "
        "used: requests.cpu=10, limited: requests.cpu=12"
    ]


def test_pod_over_quota_without_its_devices_is_left_to_upstream() -> None:
    snapshot = node_cluster(CORES_TEMPLATE, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "12"}))
    assert pod_create(TEMPLATE_POD, snapshot) == []  # its own 1 CPU is already too much


def test_pod_that_fits_somewhere_is_allowed() -> None:
    snapshot = node_cluster(CORES_TEMPLATE, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "7"}))
    assert pod_create(TEMPLATE_POD, snapshot) == []


def test_pod_create_charges_the_device_counts_of_the_claims_its_templates_create() -> None:
    gpus = template("gpus", request("gpus", "gpu", count=2))
    p = pod("p", container("main", "c"), templates={"c": "gpus"})
    hard = {"gpu.deviceclass.resource.k8s.io/devices": "2"}
    snapshot = node_cluster(
        gpus, quota("team-a-quota", hard, {"gpu.deviceclass.resource.k8s.io/devices": "1"})
    )
    assert pod_create(p, snapshot) == [
        "deny: pod team-a/p can never fit its namespace's quota, counting the node-allocatable resources of "
        "its DRA devices and the devices of the claims its templates create: exceeded quota: team-a-quota, "
        "requested: gpu.deviceclass.resource.k8s.io/devices=2, "
        "used: gpu.deviceclass.resource.k8s.io/devices=1, limited: gpu.deviceclass.resource.k8s.io/devices=2"
    ]


def test_existing_claims_are_not_charged_again_for_device_counts() -> None:
    free = claim("gpus", request("gpus", "gpu", count=2))
    p = pod("p", container("main", "c"), claims={"c": "gpus"})
    hard = {"gpu.deviceclass.resource.k8s.io/devices": "2"}
    snapshot = node_cluster(
        free, quota("team-a-quota", hard, {"gpu.deviceclass.resource.k8s.io/devices": "2"})
    )
    assert pod_create(p, snapshot) == []


def test_without_node_allocatable_devices_the_pod_is_left_to_upstream_quota() -> None:
    # The GPU example cluster's devices declare no node-allocatable resources: nothing to fold, even
    # though the pod's own cpu request alone exceeds the quota (upstream's quota admission denies it).
    snapshot = cluster(
        template("gpus", request("gpus", "gpu.example.com")),
        quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "12"}),
    )
    assert pod_create(pod("p", container("main", "c", cpu="1"), templates={"c": "gpus"}), snapshot) == []


def test_pods_in_namespaces_without_quota_or_with_missing_templates_pass() -> None:
    assert pod_create(TEMPLATE_POD, node_cluster(CORES_TEMPLATE)) == []
    snapshot = node_cluster(quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "12"}))
    assert pod_create(TEMPLATE_POD, snapshot) == []  # the template does not exist (yet)


def test_stale_snapshot_is_unavailable_where_quotas_are_and_fails_closed_by_default() -> None:
    req = admission(TEMPLATE_POD)
    limited = node_cluster(CORES_TEMPLATE, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "0"}))
    with pytest.raises(RuleUnavailable, match="stale"):
        QuotaRule().check(req, context(limited, fresh=False))
    decision = decide(req, [QuotaRule()], context(limited, fresh=False))
    assert not decision.allowed
    assert decision.message.startswith("draguard could not check rule quota: the cluster snapshot is stale")
    # Namespaces without quota have nothing to fold: a stale snapshot does not stop their pods.
    assert QuotaRule().check(req, context(node_cluster(CORES_TEMPLATE), fresh=False)) == []


def test_registration() -> None:
    req = admission(TEMPLATE_POD)
    assert any(isinstance(r, QuotaRule) for r in RULES)
    snapshot = node_cluster(CORES_TEMPLATE, quota("team-a-quota", CPU_QUOTA, {"requests.cpu": "10"}))
    decision = decide(req, RULES, context(snapshot, quota={"mode": "warn"}))
    assert decision.allowed and any("exceeded quota: team-a-quota" in w for w in decision.warnings)


# --- every quota key a footprint is charged to ----------------------------------------------------------

# Pod b declares cpu and memory limits and has one container on a claim with 4 mapped CPUs (socket0)
# and a GPU with 1Gi per pod + 512Mi per container of memory overhead: 4 CPUs and 1536Mi of memory.
BOTH = claim(
    "cores",
    request("cores", "cpu", capacity="4"),
    devices=("cpu/socket0", "gpu/gpu-0"),
    consumed={"cpu.example.com/cpu": "4"},
)
LIMITED_B = pod(
    "b",
    {
        **container("main", "c"),
        "resources": {
            "claims": [{"name": "c"}],
            "requests": {"cpu": "1"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
    },
    claims={"c": "cores"},
)
KEYS = [
    ("cpu", "4", "1"),
    ("requests.cpu", "4", "1"),
    ("limits.cpu", "4", "1"),
    ("memory", "1536Mi", "1Mi"),
    ("requests.memory", "1536Mi", "1Mi"),
    ("limits.memory", "1536Mi", "1Mi"),
]


@pytest.mark.parametrize(("key", "charge", "used"), KEYS)
def test_each_quota_key_denies_when_full_and_allows_with_room(key: str, charge: str, used: str) -> None:
    hard = str(Q(charge).add(Q(used)))
    full = node_cluster(BOTH, LIMITED_B, quota("team-a-quota", {key: charge}, {key: used}))
    assert status_update(reserve(BOTH, "b"), BOTH, full) == [
        QUOTA_MESSAGE + f"{key}={charge}, used: {key}={used}, limited: {key}={charge}"
    ]
    room = node_cluster(BOTH, LIMITED_B, quota("team-a-quota", {key: hard}, {key: used}))
    assert status_update(reserve(BOTH, "b"), BOTH, room) == []
