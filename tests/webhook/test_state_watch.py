"""The cluster state through list/watch: sync, events, bookmarks, 410 Gone, dropped connections, age.

Runs the real ``kubernetes`` client against the stand-in of tests/webhook/watch_standin.py (no
kube-apiserver can be installed here). Backoffs and debounces are shortened so each test takes
well under a second of waiting.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from watch_standin import WatchServer, running

from webhook.kube import KubeReader
from webhook.state import ClusterState
from webhook.watch import Backoff


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def device_class(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}


def pod(name: str, claims: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    return {"metadata": {"name": name, "namespace": "team-a"}, "spec": spec}


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    """A reflector or builder thread left running would go on logging into later tests."""
    yield
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.startswith("draguard-")], timeout=3.0)


@pytest.fixture
def server() -> Iterator[WatchServer]:
    with running() as s:
        yield s


def cluster_state(server: WatchServer, page_size: int = 500, **options: Any) -> ClusterState:
    api = client.ApiClient(client.Configuration(host=server.url))
    options.setdefault("backoff", lambda: Backoff(initial=0.02, cap=0.1))
    return ClusterState(KubeReader(api, page_size=page_size), debounce=0.02, **options)


@pytest.fixture
def started(server: WatchServer) -> Iterator[Callable[..., ClusterState]]:
    states: list[ClusterState] = []

    def start(**options: Any) -> ClusterState:
        state = cluster_state(server, **options)
        states.append(state)
        state.start()
        wait_for(lambda: state.synced)
        return state

    yield start
    for state in states:
        state.stop()


def test_initial_list_pages_decodes_trims_and_filters(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    for i in range(5):
        server.put("DeviceClass", device_class(f"class-{i}"))
    server.put(
        "Node",
        {
            "metadata": {
                "name": "node-1",
                "labels": {"zone": "a"},
                "managedFields": [{"manager": "kubelet"}],
            },
            "status": {"capacity": {"cpu": "8"}, "images": [{"names": ["big"]}], "conditions": []},
        },
    )
    server.put("Pod", pod("with-claims", claims=True))
    server.put("Pod", pod("plain", claims=False))
    state = started(page_size=2)
    snapshot = state.snapshot
    assert sorted(snapshot.classes) == [f"class-{i}" for i in range(5)]
    assert server.lists("deviceclasses") == 3  # 5 objects in pages of 2
    node = snapshot.nodes["node-1"].to_json()
    assert node["metadata"] == {"name": "node-1", "labels": {"zone": "a"}, "resourceVersion": "7"}
    assert node["status"] == {"capacity": {"cpu": "8"}}
    assert list(snapshot.pods) == [("team-a", "with-claims")]
    # devicetaintrules is not served by the stand-in: skipped, and the state still syncs
    assert next(r for r in state.reflectors if r.resource.plural == "devicetaintrules").skipped


def test_events_update_the_snapshot_and_a_burst_costs_one_rebuild(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    server.put("DeviceClass", device_class("gone-soon"))
    state = started()
    wait_for(lambda: all(r.connected for r in state.reflectors if not r.skipped))
    before = state.rebuilds
    old = state.snapshot
    for i in range(50):
        server.put("DeviceClass", device_class(f"burst-{i}"))
    server.delete("DeviceClass", "gone-soon")
    server.put("Pod", pod("later", claims=True))
    wait_for(lambda: len(state.snapshot.classes) == 50 and state.snapshot.pods)
    time.sleep(0.1)
    assert "gone-soon" not in state.snapshot.classes
    assert state.rebuilds - before <= 3  # 52 events, debounced
    assert "gone-soon" in old.classes  # a snapshot taken earlier never changes


def test_bookmarks_advance_the_resource_version_used_after_a_drop(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    server.put("DeviceClass", device_class("a"))
    state = started()
    wait_for(lambda: len(server.watch_versions("deviceclasses")) == 1)
    first = server.watch_versions("deviceclasses")[0]
    for i in range(3):
        server.put("Node", {"metadata": {"name": f"n{i}"}})  # moves the global resourceVersion only
    server.bookmark()
    classes = next(r for r in state.reflectors if r.resource.plural == "deviceclasses")
    wait_for(lambda: classes.resource_version == str(server.version))
    server.drop_watches()
    wait_for(lambda: len(server.watch_versions("deviceclasses")) == 2)
    assert server.watch_versions("deviceclasses")[1] == str(server.version) != first
    assert server.lists("deviceclasses") == 1  # reconnected without a re-list


def test_gone_means_relist_and_deletions_during_the_gap_are_seen(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    server.put("DeviceClass", device_class("kept"))
    server.put("DeviceClass", device_class("deleted-in-gap"))
    state = started()
    server.fail(503)  # the API server goes away; watches are cut
    # changes land and the history is compacted while nobody can watch
    server.delete("DeviceClass", "deleted-in-gap")
    server.put("DeviceClass", device_class("added-in-gap"))
    server.compact()
    server.fail(None)
    wait_for(lambda: "added-in-gap" in state.snapshot.classes)
    assert sorted(state.snapshot.classes) == ["added-in-gap", "kept"]
    assert server.lists("deviceclasses") >= 2


def test_expired_watch_is_answered_with_an_error_event_and_relisted(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    server.put("DeviceClass", device_class("a"))
    state = started()
    classes = next(r for r in state.reflectors if r.resource.plural == "deviceclasses")
    wait_for(lambda: classes.connected)
    server.put("Node", {"metadata": {"name": "n"}})
    server.compact()
    server.drop_watches()  # the reconnect asks for a version before the compaction: ERROR 410
    wait_for(lambda: server.lists("deviceclasses") == 2)
    wait_for(lambda: classes.connected)
    assert classes.resource_version == str(server.version)


def test_age_grows_while_the_api_server_is_unreachable_and_resets_after(
    server: WatchServer, started: Callable[..., ClusterState]
) -> None:
    now = [1000.0]
    state = started(clock=lambda: now[0])
    wait_for(lambda: all(r.connected for r in state.reflectors if not r.skipped))
    assert state.age() == 0.0
    server.fail(503)
    wait_for(lambda: not any(r.connected for r in state.reflectors))
    now[0] += 400.0
    assert state.age() == pytest.approx(400.0)
    server.fail(None)
    wait_for(lambda: all(r.connected for r in state.reflectors if not r.skipped))
    assert state.age() == 0.0


def test_age_is_infinite_before_the_first_sync(server: WatchServer) -> None:
    server.fail(403)
    state = cluster_state(server)
    state.start()
    try:
        time.sleep(0.1)
        assert not state.synced
        assert math.isinf(state.age())
    finally:
        state.stop()


def test_stop_ends_every_thread_promptly(server: WatchServer) -> None:
    state = cluster_state(server)
    state.start()
    wait_for(lambda: state.synced)
    t = time.monotonic()
    state.stop()
    assert time.monotonic() - t < 2.0
    assert not any(thread.is_alive() for thread in state._threads)


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    backoff = Backoff(initial=1.0, cap=5.0, jitter=1.0)
    delays = [backoff.delay() for _ in range(8)]
    assert 1.0 <= delays[0] <= 2.0
    assert 2.0 <= delays[1] <= 4.0
    assert all(d <= 5.0 for d in delays)
    assert delays[-1] == 5.0  # at the cap, jitter cannot lift it further
    backoff.reset()
    assert backoff.delay() <= 2.0


def test_an_object_that_cannot_be_decoded_is_left_out_and_named_in_the_log(
    server: WatchServer, started: Callable[..., ClusterState], caplog: pytest.LogCaptureFixture
) -> None:
    server.put("DeviceClass", device_class("good"))
    server.put("DeviceClass", {"metadata": {"name": "bad"}, "spec": {"selectors": "not-a-list"}})
    state = started()
    assert list(state.snapshot.classes) == ["good"]
    assert "DeviceClass bad cannot be decoded" in caplog.text
    assert "spec.selectors" in caplog.text
