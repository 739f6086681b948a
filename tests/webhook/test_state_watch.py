"""The cluster state through list/watch: sync, events, pagination, trimming, age, stopping.

Against the session's real API server (``tests/kube``) where it can show the case; the watch
stand-in of ``watch_standin.py`` only where it cannot be made to on demand: send a bookmark now and
then cut every watch mid-stream, or serve an object draguard cannot decode (the real one validates
what it stores). A 410 after compaction, the age of a state whose API server went away, and the
re-list that follows are shown on the real one by ``tests/kube/test_e2e_state.py`` (restarting
kube-apiserver), not here. Backoffs and debounces are shortened so each test waits little.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from controlplane import ControlPlane, call
from kubernetes import client
from watch_standin import WatchServer, running

from webhook.kube import ApiResource, KubeReader
from webhook.state import ClusterState
from webhook.watch import READ_TIMEOUT, Backoff, Reflector


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def device_class(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}


def pod(name: str, claims: bool, namespace: str = "team-a") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


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


class CountingReader(KubeReader):
    """The reader, counting the list pages it asks for per resource, and the lists that failed."""

    def __init__(self, api: client.ApiClient, page_size: int) -> None:
        super().__init__(api, page_size)
        self.pages: dict[str, int] = {}
        self.failed: dict[str, int] = {}

    def list_pages(self, resource: ApiResource) -> Iterator[tuple[list[dict[str, Any]], str]]:
        try:
            for page in super().list_pages(resource):
                self.pages[resource.plural] = self.pages.get(resource.plural, 0) + 1
                yield page
        except Exception:
            self.failed[resource.plural] = self.failed.get(resource.plural, 0) + 1
            raise


@pytest.fixture
def real_state(control_plane: ControlPlane) -> Iterator[Callable[..., tuple[ClusterState, CountingReader]]]:
    """A ClusterState on the real API server (as the cluster admin), started and synced."""
    states: list[ClusterState] = []

    def start(page_size: int = 500, user: str | None = None) -> tuple[ClusterState, CountingReader]:
        api = control_plane.client(user) if user else control_plane.client()
        reader = CountingReader(api, page_size)
        state = ClusterState(reader, debounce=0.02, backoff=lambda: Backoff(initial=0.02, cap=0.1))
        states.append(state)
        state.start()
        return state, reader

    yield start
    for state in states:
        state.stop()


def test_initial_list_pages_decodes_trims_and_filters(
    control_plane: ControlPlane,
    kube_namespace: str,
    real_state: Callable[..., tuple[ClusterState, CountingReader]],
) -> None:
    api = control_plane.client()
    prefix = kube_namespace
    classes = [f"{prefix}-class-{i}" for i in range(5)]
    node = f"{prefix}-node"
    try:
        for name in classes:
            call(
                api,
                "POST",
                "/apis/resource.k8s.io/v1/deviceclasses",
                device_class(name),
            )
        control_plane.add_node(node, labels={"zone": "a"})
        images = {"status": {"images": [{"names": ["registry.example.com/big:1"], "sizeBytes": 1}]}}
        assert call(api, "PATCH", f"/api/v1/nodes/{node}/status", images).status == 200
        plain = pod("plain", False, kube_namespace)
        plain["spec"]["schedulerName"] = "nobody"  # pending: no scheduler of the session binds it
        bound = pod("bound", False, kube_namespace)
        bound["spec"]["nodeName"] = node
        for made in (pod("with-claims", True, kube_namespace), plain, bound):
            created = call(api, "POST", f"/api/v1/namespaces/{kube_namespace}/pods", made)
            assert created.status == 201, created.body
        total = len(call(api, "GET", "/apis/resource.k8s.io/v1/deviceclasses").body["items"])
        state, reader = real_state(page_size=2)
        wait_for(lambda: state.synced, timeout=30)
        snapshot = state.snapshot
        assert set(classes) <= set(snapshot.classes)
        assert reader.pages["deviceclasses"] == -(-total // 2)  # every class, in pages of 2
        listed = snapshot.nodes[node].to_json()
        assert "managedFields" not in listed["metadata"] and listed["metadata"]["labels"]["zone"] == "a"
        # no conditions; the images ImageLocality scores by
        assert set(listed["status"]) == {"capacity", "allocatable", "images"}
        assert listed["status"]["images"] == images["status"]["images"]
        # pods with claims and pods on a node (the dry run's filters count them), not pending ones
        assert (kube_namespace, "with-claims") in snapshot.pods
        assert (kube_namespace, "bound") in snapshot.pods
        assert (kube_namespace, "plain") not in snapshot.pods
        # devicetaintrules is not served without its gate: skipped, and the state still syncs
        assert next(r for r in state.reflectors if r.resource.plural == "devicetaintrules").skipped
    finally:
        for name in classes:
            call(api, "DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{name}")
        call(api, "DELETE", f"/api/v1/nodes/{node}")


def test_events_update_the_snapshot_and_a_burst_costs_one_rebuild(
    control_plane: ControlPlane,
    kube_namespace: str,
    real_state: Callable[..., tuple[ClusterState, CountingReader]],
) -> None:
    api = control_plane.client()
    prefix = kube_namespace
    path = "/apis/resource.k8s.io/v1/deviceclasses"
    burst = [f"{prefix}-burst-{i}" for i in range(50)]
    try:
        call(api, "POST", path, device_class(f"{prefix}-gone-soon"))
        state, _ = real_state()
        wait_for(
            lambda: state.synced and all(r.connected for r in state.reflectors if not r.skipped), timeout=30
        )
        before = state.publishes
        old = state.snapshot
        for name in burst:
            call(api, "POST", path, device_class(name))
        call(api, "DELETE", f"{path}/{prefix}-gone-soon")
        call(api, "POST", f"/api/v1/namespaces/{kube_namespace}/pods", pod("later", True, kube_namespace))
        wait_for(
            lambda: (
                set(burst) <= set(state.snapshot.classes) and (kube_namespace, "later") in state.snapshot.pods
            ),
            timeout=30,
        )
        wait_for(lambda: f"{prefix}-gone-soon" not in state.snapshot.classes)
        assert state.publishes - before < 52 / 2  # 52 events, debounced into a few publishes
        assert f"{prefix}-gone-soon" in old.classes  # a snapshot taken earlier never changes
    finally:
        for name in burst:
            call(api, "DELETE", f"{path}/{name}")


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


def test_age_is_infinite_before_the_first_sync(
    real_state: Callable[..., tuple[ClusterState, CountingReader]],
) -> None:
    """A caller the API server lets list nothing (403): the state never syncs, and is not fresh."""
    state, reader = real_state(user="nobody-in-particular")
    # Every resource refused and retried at least once: the state has had its chances to sync.
    wait_for(lambda: all(reader.failed.get(r.resource.plural, 0) >= 2 for r in state.reflectors))
    assert not state.synced and not reader.pages
    assert math.isinf(state.age())


def test_stop_ends_every_thread_promptly(
    real_state: Callable[..., tuple[ClusterState, CountingReader]],
) -> None:
    state, _ = real_state()
    wait_for(lambda: state.synced, timeout=30)
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


def test_backoff_starts_over_once_no_delay_began_for_two_minutes() -> None:
    """As client-go's reflector: a watch cut long after an API server restart retries at once."""
    now = [0.0]
    backoff = Backoff(initial=1.0, cap=30.0, jitter=0.0, clock=lambda: now[0])
    assert [backoff.delay() for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    now[0] += 120.0
    assert backoff.delay() == 16.0  # within two minutes of the last: still failing
    now[0] += 120.5
    assert backoff.delay() == 1.0


class QuietServer:
    """Watches the API server ends at their timeout having sent nothing, as it does a quiet
    resource's (no event, no bookmark); time passes on ``now`` while each one lasts."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timeouts: list[int] = []

    def watch(self, resource: ApiResource, version: str, timeout: int, read_timeout: float) -> QuietServer:
        self.timeouts.append(timeout)
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.now += self.timeouts[-1]
        return iter(())

    def close(self) -> None:
        pass


def test_a_quiet_watch_is_ended_by_the_server_before_it_would_be_taken_for_dead_and_stays_fresh() -> None:
    """The soak's DeviceClass watches were silent 150 s, timed out as dead connections and backed
    off: a watch asks to end sooner than that, and one the server ended is current to its end."""
    quiet = QuietServer()
    classes = ApiResource("resource.k8s.io/v1", "deviceclasses", "DeviceClass")
    reflector = Reflector(quiet, classes, ClusterState(quiet), clock=lambda: quiet.now)  # type: ignore[arg-type]
    reflector.resource_version = "7"
    for _ in range(20):
        reflector._watch()
        assert reflector.fresh_as_of() == quiet.now
    assert max(quiet.timeouts) < READ_TIMEOUT


class ClosedUnderRead(QuietServer):
    """A watch whose connection ``stop()`` closes while the reflector reads it: http.client then
    fails on the file it lost (``'NoneType' object has no attribute 'read'``, the soak's replica
    at its restart)."""

    reflector: Reflector

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.reflector.stop()
        raise AttributeError("'NoneType' object has no attribute 'read'")


def test_a_stream_closed_under_a_read_by_stop_ends_the_reflector_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = ClosedUnderRead()
    classes = ApiResource("resource.k8s.io/v1", "deviceclasses", "DeviceClass")
    closed.reflector = Reflector(closed, classes, ClusterState(closed))  # type: ignore[arg-type]
    closed.reflector.resource_version = "7"
    closed.reflector.run()
    assert closed.timeouts and not caplog.records


def test_an_object_that_cannot_be_decoded_is_left_out_and_named_in_the_log(
    server: WatchServer, started: Callable[..., ClusterState], caplog: pytest.LogCaptureFixture
) -> None:
    server.put("DeviceClass", device_class("good"))
    server.put("DeviceClass", {"metadata": {"name": "bad"}, "spec": {"selectors": "not-a-list"}})
    state = started()
    assert list(state.snapshot.classes) == ["good"]
    assert "DeviceClass bad cannot be decoded" in caplog.text
    assert "spec.selectors" in caplog.text
