"""The cluster state after a 410: the re-list decodes what changed, drops what is gone, and ends where
a fresh state's list starts.

A watch whose resourceVersion was compacted away ends with a 410 and the reflector lists again. The
store already holds every object it kept, by resourceVersion, so the re-list hands over (and the
state decodes) only objects whose version changed: a 410 on a large cluster must not decode, nor
hold, a second copy of it. Against the watch stand-in (``watch_standin.py``), which can lose a
known set of changes with its history on demand; the real API server's 410 is shown by
``tests/kube/test_e2e_state.py``.
"""

from __future__ import annotations

import copy
from typing import Any

from test_state_watch import cluster_state, no_thread_outlives_its_test, wait_for  # noqa: F401 (autouse fixture)
from watch_standin import WatchServer, running

from policies.scheduler.podinfo import EMPTY_NODE
from policies.snapshot import Key, Snapshot
from webhook.state import ClusterState

NS = "gpu-test1"


def device_class(name: str, expression: str = "device.driver == 'gpu.example.com'") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def gpu_slice(node: str, models: tuple[str, ...] = ("a100", "a100")) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": m}}} for i, m in enumerate(models)]
    return {
        "metadata": {"name": f"{node}-gpu.example.com-k8x2p"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str | None, claims: bool, phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "ctr0",
                "image": "ubuntu:24.04",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
        "priority": 0,
    }
    status: dict[str, Any] = {"phase": phase}
    if node_name is not None:
        spec["nodeName"] = node_name
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu-x1"}]
    return {
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "demo"}},
        "spec": spec,
        "status": status,
    }


class Decodes:
    """What a state decodes, by kind and key (the state's decoder wrapped)."""

    def __init__(self, state: ClusterState) -> None:
        self.seen: list[tuple[str, Key]] = []
        decoded = state._decoded

        def counted(kind: str, raw: dict[str, Any]) -> Any:
            metadata = raw.get("metadata") or {}
            self.seen.append((kind, (metadata.get("namespace") or "", metadata.get("name") or "")))
            return decoded(kind, raw)

        state._decoded = counted  # type: ignore[method-assign]


def relisted(server: WatchServer, plurals: list[str], before: dict[str, int]) -> bool:
    return all(server.lists(p) > before[p] for p in plurals)


PLURALS = ["deviceclasses", "resourceslices", "pods", "nodes"]


def assert_same_state(got: Snapshot, want: Snapshot) -> None:
    assert {k: v.to_json() for k, v in got.classes.items()} == {
        k: v.to_json() for k, v in want.classes.items()
    }
    assert [s.to_json() for s in got.slices] == [s.to_json() for s in want.slices]
    assert {k: v.to_json() for k, v in got.nodes.items()} == {k: v.to_json() for k, v in want.nodes.items()}
    assert dict(got.devices) == dict(want.devices)
    assert dict(got.pods) == dict(want.pods)
    assert {k: v.to_json() for k, v in got.pending.items()} == {
        k: v.to_json() for k, v in want.pending.items()
    }
    got_loads = {
        n: ({(p.namespace, p.name) for p in v.pods}, v.requested) for n, v in got.node_pods.items() if v.pods
    }
    want_loads = {
        n: ({(p.namespace, p.name) for p in v.pods}, v.requested) for n, v in want.node_pods.items() if v.pods
    }
    assert got_loads == want_loads


def test_a_relist_after_a_410_decodes_what_changed_and_drops_what_is_gone() -> None:
    with running() as server:
        for i in range(5):
            server.put("DeviceClass", device_class(f"gpu-class-{i}"))
        for i in range(3):
            server.put("Node", node(f"node-{i}"))
            server.put("ResourceSlice", gpu_slice(f"node-{i}"))
        pods = {
            "bound-0": pod("bound-0", "node-0", claims=True),
            "bound-1": pod("bound-1", "node-1", claims=False),
            "bound-2": pod("bound-2", "node-2", claims=True),
            "waiting": pod("waiting", None, claims=True, phase="Pending"),
            # Not kept by the snapshot (no claims, not on a node): nothing holds their version.
            "plain-pending": pod("plain-pending", None, claims=False, phase="Pending"),
            "finished": pod("finished", "node-0", claims=False, phase="Succeeded"),
        }
        for raw in pods.values():
            server.put("Pod", raw)
        state = cluster_state(server)
        decodes = Decodes(state)
        state.start()
        try:
            wait_for(lambda: state.synced and all(r.connected for r in state.reflectors if not r.skipped))
            first = state.snapshot
            assert len(first.classes) == 5 and len(first.pods) == 4 and len(first.devices) == 6
            assert {k for k, key in decodes.seen} == {"DeviceClass", "ResourceSlice", "Pod", "Node"}
            decodes.seen.clear()
            lists = {p: server.lists(p) for p in PLURALS}

            relabelled = copy.deepcopy(pods["bound-1"])
            relabelled["metadata"]["labels"]["version"] = "2"
            changes: dict[str, dict[Key, dict[str, Any] | None]] = {
                "DeviceClass": {
                    ("", "gpu-class-1"): device_class(
                        "gpu-class-1", "device.attributes['gpu.example.com'].model == 'a100'"
                    ),
                    ("", "gpu-class-3"): None,
                    ("", "gpu-class-9"): device_class("gpu-class-9"),
                },
                "ResourceSlice": {("", "node-2-gpu.example.com-k8x2p"): gpu_slice("node-2", ("h100",))},
                "Pod": {(NS, "bound-1"): relabelled, (NS, "bound-2"): None},
                "Node": {("", "node-1"): None},
            }
            for kind, changed in changes.items():
                server.expire(kind, changed)
            wait_for(
                lambda: (
                    relisted(server, PLURALS, lists)
                    and all(r.connected for r in state.reflectors if not r.skipped)
                )
            )
            wait_for(lambda: "gpu-class-9" in state.snapshot.classes and "node-1" not in state.snapshot.nodes)
            wait_for(lambda: (NS, "bound-2") not in state.snapshot.pods)
            after = state.snapshot
        finally:
            state.stop()

        # Decoded again: what changed or was added, and the pods the snapshot does not keep (it holds
        # no version for them); never an object held at the same resourceVersion.
        written = {
            (kind, key)
            for kind, changed in changes.items()
            for key, obj in changed.items()
            if obj is not None
        }
        not_kept = {("Pod", (NS, "plain-pending")), ("Pod", (NS, "finished"))}
        assert written <= set(decodes.seen)
        assert set(decodes.seen) - written <= not_kept, set(decodes.seen) - written
        assert len(decodes.seen) == len(set(decodes.seen))
        # What is gone is dropped; what did not change is the very object held before.
        assert "gpu-class-3" not in after.classes and "node-1" not in after.nodes
        assert (NS, "bound-2") not in after.pods and not after.node_pods.get("node-2", EMPTY_NODE).pods
        assert after.classes["gpu-class-0"] is first.classes["gpu-class-0"]
        assert after.pods[(NS, "bound-0")] is first.pods[(NS, "bound-0")]
        assert after.pods[(NS, "bound-1")].labels == {"app": "demo", "version": "2"}
        assert [d.name for k, d in after.devices.items() if k[1] == "node-2"] == ["gpu-0"]

        # And the state is what a fresh one lists.
        fresh = cluster_state(server)
        fresh.start()
        try:
            wait_for(lambda: fresh.synced)
            assert_same_state(after, fresh.snapshot)
        finally:
            fresh.stop()
