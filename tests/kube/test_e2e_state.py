"""draguard's cluster state across a real API server restart, and across a 410 Gone.

While kube-apiserver is down the snapshot goes stale: past ``snapshot.maxAgeSeconds`` (3 s here)
``draguard_snapshot_age_seconds`` says how old it is, ``/readyz`` says it in its body (and stays
200, see ``webhook.server.readiness``), and a rule that needs the state does not decide on it: the
``prescheduled`` rule, set to ``failurePolicy: Fail``, refuses with the reason instead. With the API
server down, nothing can send that review but the test, which sends it as the API server would.
Once the API server is back the state resyncs and decisions are made on current objects again.

The 410: etcd's history is compacted, then the API server restarted, so its watch cache starts
empty at the current revision and every watch draguard resumes from an older resourceVersion is
answered "too old resource version" (see ``tests/kube/test_controlplane.py``); draguard lists again.

Both restarts end with the API server ready (``restart_apiserver`` waits for ``/readyz``), so the
test modules after this one find it healthy.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed, remove
from workloads import device_class, resource_slice

from webhook.demo import pod_review

NS = "e2e-state"
DRIVER = "state.example.com"
MAX_AGE = 3
VALUES = {"snapshot": {"maxAgeSeconds": MAX_AGE}, "rules": {"prescheduled": {"failurePolicy": "Fail"}}}


def node_slice(node: str, model: str) -> dict[str, Any]:
    """One GPU of ``model`` on ``node``."""
    published = resource_slice(DRIVER, node)
    published["spec"]["devices"][0]["attributes"] = {"model": {"string": model}}
    return published


def claim(name: str, model: str) -> dict[str, Any]:
    selector = f'device.attributes["{DRIVER}"].model == "{model}"'
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": DRIVER, "selectors": [{"cel": {"expression": selector}}]},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def pinned_pod_review() -> dict[str, Any]:
    """What the API server sends for a pod pinned with spec.nodeName that uses a claim."""
    container = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.9",
        "resources": {"claims": [{"name": "gpu"}]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pinned", "namespace": NS},
        "spec": {
            "nodeName": "state-node-a",
            "containers": [container],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "before"}],
        },
    }
    return pod_review(pod)


@dataclass
class Watcher:
    draguard: Draguard
    ca_file: Path

    def readyz(self) -> tuple[int, str]:
        return self.draguard.replica[0].get("/readyz")

    def age(self) -> float:
        _, text = self.draguard.replica[0].get("/metrics", metrics=True)
        found = re.search(r"^draguard_snapshot_age_seconds (\S+)$", text, re.MULTILINE)
        assert found, text
        return float(found[1])

    def review(self) -> dict[str, Any]:
        """The prescheduled rule's answer, asked directly as the API server would ask it."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        connection = http.client.HTTPSConnection("127.0.0.1", self.draguard.balancer.port, context=context)
        try:
            body = json.dumps(pinned_pod_review())
            connection.request("POST", "/validate/prescheduled", body, {"Content-Type": "application/json"})
            response: dict[str, Any] = json.loads(connection.getresponse().read())["response"]
            return response
        finally:
            connection.close()

    def fresh(self) -> bool:
        status, text = self.readyz()
        return status == 200 and text == "ok" and self.age() <= MAX_AGE


@pytest.fixture(scope="module")
def watcher(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watcher]:
    admin = control_plane.client()
    for node in ("state-node-a", "state-node-b"):
        control_plane.add_node(node)
    objects = [device_class(DRIVER), node_slice("state-node-a", "A100")]
    apply(admin, objects)
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}
        for n in ("state-node-a", "state-node-b")
    ]
    try:
        with control_plane.namespace(NS), installed(control_plane, VALUES) as deployment:
            ca_file = tmp_path_factory.mktemp("state") / "ca.crt"
            ca_file.write_bytes(deployment.ca_bundle())
            watcher = Watcher(deployment, ca_file)
            wait_for("a fresh state", watcher.fresh)
            try:
                yield watcher
            finally:  # while draguard is here (see test_e2e_quota)
                call(admin, "DELETE", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims")
    finally:
        remove(admin, [*objects, node_slice("state-node-b", "H100"), *nodes])


def restarted(plane: ControlPlane, watcher: Watcher, compact: bool) -> dict[str, Any]:
    """Restart the API server (after compacting etcd's history with ``compact``); while it is down,
    wait until draguard calls its state stale, and return what the prescheduled rule answers then.

    The restart runs on this thread and the watching on another: the API server is spawned with a
    parent-death signal, which the kernel ties to the spawning thread, not the process."""
    seen: dict[str, Any] = {}

    def while_down() -> None:
        try:
            wait_for("draguard to call its state stale", lambda: "stale:" in watcher.readyz()[1], timeout=30)
            seen["readyz"], seen["age"] = watcher.readyz(), watcher.age()
            seen["answer"] = watcher.review()
        except Exception as err:  # reported below, on the test's thread
            seen["error"] = err

    observer = threading.Thread(target=while_down, daemon=True)
    observer.start()
    if compact:
        plane.compact_etcd()
    plane.restart_apiserver()
    observer.join(30)
    if "error" in seen:
        raise seen["error"]
    status, text = seen["readyz"]
    assert status == 200 and text.startswith("ok\nstale: the cluster state was last confirmed"), text
    assert seen["age"] > MAX_AGE
    answer: dict[str, Any] = seen["answer"]
    return answer


def test_a_restarted_api_server_leaves_no_decision_on_a_stale_state(
    watcher: Watcher, control_plane: ControlPlane
) -> None:
    api = control_plane.client()
    made = call(
        api, "POST", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", claim("before", "A100")
    )
    assert made.status == 201 and made.warnings == (), made
    answer = restarted(control_plane, watcher, compact=False)
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        "draguard could not check rule prescheduled: the cluster snapshot is stale: "
        "the pod's claims cannot be checked"
    )
    wait_for("the state to resync", watcher.fresh, timeout=60)
    # on the current state again: the claim exists and is not allocated, which is the rule's own reason
    answer = watcher.review()
    assert answer["allowed"] is False and "not allocated" in answer["status"]["message"], answer


def test_after_a_410_the_state_is_listed_again_with_what_changed(
    watcher: Watcher, control_plane: ControlPlane
) -> None:
    log = watcher.draguard.replica[0].component
    assert log is not None
    listed_before = log.log.read_text().count("listing again")
    restarted(control_plane, watcher, compact=True)
    # written and deleted as the API server comes back, while draguard's watches wait to reconnect
    apply(control_plane.client(), [node_slice("state-node-b", "H100")])
    remove(control_plane.client(), [node_slice("state-node-a", "A100")])
    wait_for("the state to resync", watcher.fresh, timeout=60)
    assert log.log.read_text().count("listing again") > listed_before  # a watch was answered 410
    # the H100 is in the state and the A100 is not: "matches none" for the one, not the other
    wait_for("the new slice in the state", lambda: not model_claim(control_plane, "H100").warnings)
    assert any("matches none" in w for w in model_claim(control_plane, "A100").warnings)


def model_claim(plane: ControlPlane, model: str) -> Any:
    """A claim for a GPU model, under a fresh name each time (a user trying again after a warning)."""
    name = f"after-{uuid.uuid4().hex[:6]}"
    path = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
    made = call(plane.client(), "POST", path, claim(name, model))
    assert made.status == 201, made.body
    return made
