"""Rule drain: a DRA driver pod is not evicted while claims on its node are still in use."""

from __future__ import annotations

from typing import Any

import pytest
from rule_fixtures import ADMIN, cluster, context

from policies.config import Config
from policies.rules.drain import DrainRule
from policies.rules.engine import Context, Request, RuleUnavailable, decide

SELECTOR = {"driverPodSelector": {"matchLabels": {"app": "gpu-driver"}}}
TRAINER_UID = "6f1c1f38-5d47-4c1e-9a0e-2d6f7c1d9b01"  # reserves team-a/running-job in examples/gpu-cluster
DRIVER_UID = "d0000000-0000-0000-0000-000000000001"


def pod(name: str, node: str, uid: str, namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
    }


def driver_pod(node: str = "node-1") -> dict[str, Any]:
    return pod(f"plugin-{node}", node, DRIVER_UID, namespace="gpu-driver", app="gpu-driver")


def claim(name: str, *reserved_by: str, node_selector: bool = False, device: str = "gpu-2") -> dict[str, Any]:
    allocation: dict[str, Any] = {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "node-1", "device": device}
    ]}}
    if node_selector:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}
        ]}]}
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {
            "allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": "x", "uid": uid} for uid in reserved_by],
        },
    }


def eviction(name: str, namespace: str = "gpu-driver") -> Request:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    return Request(
        uid="e1", operation="CREATE", group="", version="v1", kind="Eviction", resource="pods",
        sub_resource="eviction", namespace=namespace, name=name, user=ADMIN, raw=body,
    )


def drain_context(*extra: dict[str, Any], **settings: Any) -> Context:
    trainer = pod("trainer-0", "node-1", TRAINER_UID)
    snapshot = cluster(trainer, driver_pod(), driver_pod("node-2"), *extra)
    return context(snapshot, drain={**SELECTOR, **settings})


def messages(request: Request, ctx: Context) -> list[tuple[str, str]]:
    return [(f.action, f.message) for f in DrainRule().check(request, ctx)]


HELD = (
    "DRA driver pod gpu-driver/plugin-node-1 on node node-1 must not be evicted yet: claims {claims} are "
    "still reserved by workload pods, and the driver must stay to unprepare their devices; drain the "
    "workload pods first, then evict the driver pod"
)


def test_driver_pod_with_claims_in_use_on_its_node_is_not_evicted_yet() -> None:
    """Not yet: the refusal lifts once the workloads are gone, so drainers are told to retry."""
    ctx = drain_context()
    assert messages(eviction("plugin-node-1"), ctx) == [("deny", HELD.format(claims="team-a/running-job"))]
    decision = decide(eviction("plugin-node-1"), [DrainRule()], ctx)
    assert (decision.allowed, decision.retry_later) == (False, True)


def test_driver_pod_on_a_node_without_claims_in_use_is_evicted() -> None:
    assert messages(eviction("plugin-node-2"), drain_context()) == []


def test_workload_pods_and_unknown_pods_are_not_guarded() -> None:
    ctx = drain_context()
    assert messages(eviction("trainer-0", namespace="team-a"), ctx) == []
    assert messages(eviction("not-in-snapshot"), ctx) == []


def test_claims_reserved_only_by_the_driver_itself_do_not_block() -> None:
    freed = claim("running-job", DRIVER_UID, node_selector=True)
    assert messages(eviction("plugin-node-1"), drain_context(freed)) == []


def test_claims_count_by_selector_by_local_device_or_by_consumer_on_the_node() -> None:
    # zone-a selector matches node-1; a node-1 device; a network device used by a pod on node-1.
    by_selector = claim("by-selector", "u-1", node_selector=True)
    by_device = claim("by-device", "u-2")
    remote = claim("remote", TRAINER_UID, device="nic-0")
    remote["status"]["allocation"]["devices"]["results"][0]["pool"] = "fabric"
    unrelated = claim("unrelated", "u-3", device="nic-1")
    unrelated["status"]["allocation"]["devices"]["results"][0]["pool"] = "fabric"
    ctx = drain_context(by_selector, by_device, remote, unrelated)
    assert messages(eviction("plugin-node-1"), ctx) == [("deny", HELD.format(
        claims="team-a/running-job, team-a/by-selector, team-a/by-device and 1 more"
    ))]


def test_inactive_without_a_selector_and_empty_selector_is_refused() -> None:
    assert not DrainRule().applies(eviction("plugin-node-1"), context())
    assert DrainRule().applies(eviction("plugin-node-1"), drain_context())
    with pytest.raises(ValueError, match=r"(?s)rules\.drain\.driverPodSelector.*matchLabels must name"):
        Config.model_validate({"rules": {"drain": {"driverPodSelector": {"matchLabels": {}}}}})


def test_only_evictions_are_looked_at() -> None:
    delete = Request(
        uid="d1", operation="DELETE", group="", version="v1", kind="Pod", resource="pods",
        sub_resource="", namespace="gpu-driver", name="plugin-node-1", user=ADMIN,
    )
    assert not DrainRule().applies(delete, drain_context())


@pytest.mark.parametrize("operation", ["DELETE", "UPDATE", "CONNECT"])
def test_only_the_creation_of_an_eviction_is_looked_at(operation: str) -> None:
    """The operation is checked on its own: everything else of the request is an eviction of a
    driver pod that would be refused if it were a CREATE."""
    ctx = drain_context(claim("c1", "pod-uid"))
    assert DrainRule().applies(eviction("plugin-node-1"), ctx)
    assert not DrainRule().applies(eviction("plugin-node-1")._replace(operation=operation), ctx)


def test_stale_snapshot_cannot_decide() -> None:
    fresh = drain_context()
    stale = Context(fresh.snapshot, fresh.config, fresh.now, snapshot_fresh=False)
    with pytest.raises(RuleUnavailable, match="snapshot is stale"):
        DrainRule().check(eviction("plugin-node-1"), stale)


def test_warn_mode_lets_the_eviction_through_with_the_reason() -> None:
    decision = decide(eviction("plugin-node-1"), [DrainRule()], drain_context(mode="warn"))
    assert decision.allowed
    assert decision.warnings == (HELD.format(claims="team-a/running-job"),)


def test_eviction_without_a_pod_name_is_not_a_driver_pod() -> None:
    nameless = Request(
        uid="e2", operation="CREATE", group="", version="v1", kind="Eviction", resource="pods",
        sub_resource="eviction", namespace="gpu-driver", name="", user=ADMIN, raw={"kind": "Eviction"},
    )
    assert messages(nameless, drain_context()) == []
