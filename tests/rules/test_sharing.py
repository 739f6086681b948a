"""Rule sharing: None / SamePod / MultiPod per device, on Pod CREATE and on reservedFor updates."""

from __future__ import annotations

from typing import Any

import pytest
from node_allocatable_fixtures import claim, container, node_cluster, pod, request, reserve
from rule_fixtures import admission, context

from policies.rules.engine import RuleUnavailable, decide
from policies.rules.registry import RULES
from policies.rules.sharing import SharingRule
from policies.snapshot import Snapshot

CORES = claim(
    "cores",
    request("cores", "cpu", capacity="4"),
    devices=("cpu/socket0",),
    consumed={"cpu.example.com/cpu": "4"},
    reserved=("a",),
)
GPU = claim("gpu", request("gpu", "gpu"), devices=("gpu/gpu-0",), reserved=("a",))
HUGE = claim("huge", request("huge", "mem"), devices=("mem/hp-0",), reserved=("a",))
NIC = claim("nic", request("nic", "nic"), devices=("nic/nic-0",), reserved=("a",))
PINNED = claim("pinned", request("nic", "nic"), devices=("nic/nic-1",))

SAME_POD_DEFAULT = (
    "its device cpu.example.com/node-1/socket0 has sharing policy SamePod (default: the device maps "
    "node-allocatable resources directly), so only the containers of one pod may use it"
)


def check(
    obj: dict[str, Any], snapshot: Snapshot, *, old: dict[str, Any] | None = None, **rules: Any
) -> list[str]:
    operation = "UPDATE" if old is not None else "CREATE"
    sub = "status" if old is not None else ""
    req = admission(obj, operation=operation, old=old, sub_resource=sub)
    ctx = context(snapshot, **rules)
    rule = SharingRule()
    assert rule.applies(req, ctx)
    return [f"{f.action}: {f.message}" for f in rule.check(req, ctx)]


def second_pod(claim_name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return pod("b", *(containers or (container("main", "c"),)), claims={"c": claim_name})


# --- Pod CREATE ------------------------------------------------------------------------------------


def test_same_pod_default_denies_a_second_pod() -> None:
    assert check(second_pod("cores"), node_cluster(CORES)) == [
        f"deny: pod team-a/b cannot use claim team-a/cores: it is already reserved by pod team-a/a, and "
        f"{SAME_POD_DEFAULT}; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]


def test_same_pod_1_36_mapping_is_same_pod_too() -> None:
    assert check(second_pod("huge"), node_cluster(HUGE)) == [
        "deny: pod team-a/b cannot use claim team-a/huge: it is already reserved by pod team-a/a, and its "
        "device mem.example.com/node-1/hp-0 has sharing policy SamePod (default: the device maps "
        "node-allocatable resources directly), so only the containers of one pod may use it; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]


def test_same_pod_allows_many_containers_of_one_pod_and_the_pod_already_reserved() -> None:
    free = claim(
        "cores",
        request("cores", "cpu", capacity="4"),
        devices=("cpu/socket0",),
        consumed={"cpu.example.com/cpu": "4"},
    )
    assert check(second_pod("cores", container("x", "c"), container("y", "c")), node_cluster(free)) == []
    again = pod("a", container("main", "c"), claims={"c": "cores"})
    assert check(again, node_cluster(CORES)) == []


def test_multi_pod_default_for_overhead_only_devices_allows_a_second_pod() -> None:
    assert check(second_pod("gpu"), node_cluster(GPU)) == []


def test_devices_without_node_resources_are_unrestricted() -> None:
    assert check(second_pod("nic", container("x", "c"), container("y", "c")), node_cluster(NIC)) == []


def test_none_from_the_device_attribute_denies_two_containers_of_one_pod() -> None:
    two = pod("b", container("x", "c"), container("y", "c"), claims={"c": "pinned"})
    assert check(two, node_cluster(PINNED)) == [
        "deny: containers x, y of pod team-a/b all reference claim team-a/pinned, but its device "
        "nic.example.com/node-1/nic-1 has sharing policy None (device attribute draguard.io/sharingPolicy), "
        "so only one container of one pod may use it; give each container its own claim"
    ]
    one = pod("b", container("x", "c"), container("y"), claims={"c": "pinned"})
    assert check(one, node_cluster(PINNED)) == []


def test_none_also_denies_a_second_pod() -> None:
    taken = reserve(PINNED, "a")
    assert check(second_pod("pinned"), node_cluster(taken)) == [
        "deny: pod team-a/b cannot use claim team-a/pinned: it is already reserved by pod team-a/a, and its "
        "device nic.example.com/node-1/nic-1 has sharing policy None (device attribute "
        "draguard.io/sharingPolicy), so only one container of one pod may use it; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]


@pytest.mark.parametrize(
    "entry",
    [
        {"driver": "gpu.example.com"},
        {"deviceClassName": "gpu"},
        {"selector": 'device.attributes["gpu.example.com"].model == "a100"'},
    ],
)
def test_config_sets_the_policy_by_driver_class_or_selector(entry: dict[str, str]) -> None:
    sharing = {"policies": [{"policy": "SamePod", **entry}]}
    assert check(second_pod("gpu"), node_cluster(GPU), sharing=sharing) == [
        "deny: pod team-a/b cannot use claim team-a/gpu: it is already reserved by pod team-a/a, and its "
        "device gpu.example.com/node-1/gpu-0 has sharing policy SamePod (draguard config "
        "sharing.policies[0]), so only the containers of one pod may use it; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]


def test_config_entries_that_do_not_match_leave_the_default() -> None:
    sharing = {
        "policies": [
            {"policy": "SamePod", "driver": "other.example.com"},
            {"policy": "SamePod", "deviceClassName": "cpu"},
            {"policy": "SamePod", "selector": 'device.attributes["gpu.example.com"].model == "h100"'},
            {"policy": "SamePod", "driver": "gpu.example.com", "deviceClassName": "cpu"},
        ]
    }
    assert check(second_pod("gpu"), node_cluster(GPU), sharing=sharing) == []


def test_config_can_relax_a_default_and_the_attribute_wins_over_config() -> None:
    relaxed = {"policies": [{"policy": "MultiPod", "driver": "cpu.example.com"}]}
    assert check(second_pod("cores"), node_cluster(CORES), sharing=relaxed) == []
    ignored = {"policies": [{"policy": "MultiPod", "driver": "nic.example.com"}]}
    assert len(check(second_pod("pinned"), node_cluster(reserve(PINNED, "a")), sharing=ignored)) == 1


def test_claims_that_do_not_exist_or_are_not_allocated_are_left_to_the_reservation_check() -> None:
    pending = claim("pending", request("cores", "cpu", capacity="4"))
    assert (
        check(pod("b", container("x", "c"), claims={"c": "pending", "d": "missing"}), node_cluster(pending))
        == []
    )


# --- ResourceClaim status: reservedFor -------------------------------------------------------------


def test_reserving_a_same_pod_claim_for_a_second_pod_is_denied() -> None:
    assert check(reserve(CORES, "b"), node_cluster(CORES), old=CORES) == [
        f"deny: claim team-a/cores cannot be reserved for pod team-a/b: it would be shared by pod team-a/a, "
        f"pod team-a/b, but {SAME_POD_DEFAULT}; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]


def test_first_reservation_and_multi_pod_reservations_are_allowed() -> None:
    free = claim(
        "cores",
        request("cores", "cpu", capacity="4"),
        devices=("cpu/socket0",),
        consumed={"cpu.example.com/cpu": "4"},
    )
    assert check(reserve(free, "a"), node_cluster(free), old=free) == []
    assert check(reserve(GPU, "b"), node_cluster(GPU), old=GPU) == []


def test_updates_that_add_no_consumer_are_not_judged() -> None:
    both = reserve(CORES, "b")  # already shared (created before draguard ran): leave it be
    assert check(both, node_cluster(both), old=both) == []


def test_reserving_a_none_claim_for_a_pod_whose_two_containers_use_it_is_denied() -> None:
    two = pod("b", container("x", "c"), container("y", "c"), claims={"c": "pinned"})
    assert check(reserve(PINNED, "b"), node_cluster(PINNED, two), old=PINNED) == [
        "deny: containers x, y of pod team-a/b all reference claim team-a/pinned, but its device "
        "nic.example.com/node-1/nic-1 has sharing policy None (device attribute draguard.io/sharingPolicy), "
        "so only one container of one pod may use it; give each container its own claim"
    ]


def test_template_claims_are_found_through_the_pod_status() -> None:
    generated = claim("b-c-x7", request("nic", "nic"), devices=("nic/nic-1",))
    two = pod("b", container("x", "c"), container("y", "c"), templates={"c": "nic-template"})
    two["status"] = {"resourceClaimStatuses": [{"name": "c", "resourceClaimName": "b-c-x7"}]}
    found = check(reserve(generated, "b"), node_cluster(generated, two), old=generated)
    assert found and found[0].startswith(
        "deny: containers x, y of pod team-a/b all reference claim team-a/b-c-x7"
    )


# --- engine wiring ---------------------------------------------------------------------------------


def test_only_pod_create_and_claim_status_updates_are_looked_at() -> None:
    rule, ctx = SharingRule(), context(node_cluster(CORES))
    assert not rule.applies(admission(pod("b")), ctx)  # no claims
    assert not rule.applies(admission(CORES, operation="UPDATE", old=CORES), ctx)  # main resource
    assert not rule.applies(admission(second_pod("cores"), operation="UPDATE", old=second_pod("cores")), ctx)


def test_a_pod_on_a_stale_snapshot_is_judged_on_its_containers_not_the_claims_users() -> None:
    """The users a stale snapshot shows may be gone (a false denial) or missing: the pod's check
    skips them and the reservation, judged on its own update, guards (issue 25's soak refused
    31-186 pod creations per fault window for this); its own containers are still judged."""
    second = admission(second_pod("cores"))
    assert SharingRule().check(second, context(node_cluster(CORES), fresh=True))
    assert SharingRule().check(second, context(node_cluster(CORES), fresh=False)) == []
    both = admission(pod("b", container("x", "c"), container("y", "c"), claims={"c": "pinned"}))
    found = SharingRule().check(both, context(node_cluster(PINNED), fresh=False))
    assert [f.action for f in found] == ["deny"] and "containers x, y of pod team-a/b" in found[0].message


def test_a_reservation_is_judged_on_a_stale_snapshot_that_holds_its_devices() -> None:
    """The update carries the claim's users before and after: a stale snapshot still knows the
    device's policy, and the second pod is denied (issue 25's soak let one on, "could not check")."""
    req = admission(reserve(CORES, "b"), operation="UPDATE", old=CORES, sub_resource="status")
    found = SharingRule().check(req, context(node_cluster(CORES), fresh=False))
    assert [f.action for f in found] == ["deny"]
    assert "would be shared by pod team-a/a, pod team-a/b" in found[0].message


def test_a_reservation_whose_device_or_none_pod_the_snapshot_lacks_is_denied_by_default() -> None:
    """Unknown is not unrestricted: the rule cannot decide, and its default failurePolicy is Fail."""
    gone = claim("cores", request("cores", "cpu"), devices=("cpu/socket9",), reserved=("a",))
    lacking_device = admission(reserve(gone, "b"), operation="UPDATE", old=gone, sub_resource="status")
    lacking_pod = admission(reserve(PINNED, "b"), operation="UPDATE", old=PINNED, sub_resource="status")
    for req, snapshot, missing in (
        (lacking_device, node_cluster(gone), "device cpu.example.com/node-1/socket9"),
        (lacking_pod, node_cluster(PINNED), "pod team-a/b"),
    ):
        with pytest.raises(RuleUnavailable, match=missing):
            SharingRule().check(req, context(snapshot))
        decision = decide(req, RULES, context(snapshot))
        assert not decision.allowed and "could not check rule sharing" in decision.message


def test_registered_and_warn_mode_turns_the_denial_into_a_warning() -> None:
    assert any(isinstance(r, SharingRule) for r in RULES)
    req = admission(second_pod("cores"))
    enforced = decide(req, RULES, context(node_cluster(CORES)))
    assert not enforced.allowed and "claim team-a/cores" in enforced.message
    warned = decide(req, RULES, context(node_cluster(CORES), sharing={"mode": "warn"}))
    assert warned.allowed and any("claim team-a/cores" in w for w in warned.warnings)


def test_a_mapped_device_without_consumed_capacity_is_still_same_pod() -> None:
    # The footprint cannot be computed (the scheduler would fail the pod), the policy still can.
    odd = claim("cores", request("cores", "cpu"), devices=("cpu/socket0",), reserved=("a",))
    assert check(second_pod("cores"), node_cluster(odd)) == [
        f"deny: pod team-a/b cannot use claim team-a/cores: it is already reserved by pod team-a/a, and "
        f"{SAME_POD_DEFAULT}; "
        "give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    ]
