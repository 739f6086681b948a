"""``draguard serve`` as a subprocess: real AdmissionReviews over HTTPS with certificate verification.

Each server runs ``python -m webhook.cli serve`` with ``--port 0`` (the banner says which ports it
got) and a generated CA that the client trusts, so TLS is checked exactly as the API server would
check it against the caBundle.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import queue
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from copy import deepcopy
from dataclasses import dataclass, field
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, call

from certs.material import generate_ca, issue_client, issue_serving
from webhook.commands.serve import generate_pair
from webhook.demo import documents, pod_review, split

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int
    metrics_port: int
    health_port: int
    ca: str
    lines: list[str] = field(default_factory=list)

    def context(self, ca: str | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=ca or self.ca)

    def request(
        self, method: str, path: str, body: bytes | None = None, ca: str | None = None
    ) -> tuple[int, str]:
        connection = HTTPSConnection("127.0.0.1", self.port, context=self.context(ca), timeout=10)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            connection.request(method, path, body, headers)
            response = connection.getresponse()
            return response.status, response.read().decode()
        finally:
            connection.close()

    def review(self, review: dict[str, Any], path: str = "/validate") -> dict[str, Any]:
        status, text = self.request("POST", path, json.dumps(review).encode())
        assert status == 200, text
        answer: dict[str, Any] = json.loads(text)
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        assert answer["response"]["uid"] == review["request"]["uid"]
        response: dict[str, Any] = answer["response"]
        return response

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text

    def probe(self, path: str) -> tuple[int, str]:
        """A kubelet-style probe: plain HTTP on the health port."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()


def start(*args: str, timeout: float = 20.0, log: Path | None = None) -> Served:
    """Start ``draguard serve`` and wait for its banner (ports, CA); its JSON log goes to ``log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ports = ["--port", "0", "--metrics-port", "0", "--health-port", "0"]
    command = [sys.executable, "-m", "webhook.cli", "serve", *ports, *args]
    log_file = log.open("w") if log is not None else None
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log_file or subprocess.DEVNULL, text=True
    )
    if log_file is not None:
        log_file.close()  # the child writes through its own copy
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not any("press Ctrl-C" in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            process.kill()
            raise AssertionError(f"serve printed no banner: {seen}, exit {process.poll()}") from None
    text = "".join(seen)
    port = int(re.search(r"serving https://[^:]+:(\d+)", text).group(1))  # type: ignore[union-attr]
    metrics_port = int(re.search(r"metrics at http://[^:]+:(\d+)", text).group(1))  # type: ignore[union-attr]
    health_port = int(re.search(r"probes at http://[^:]+:(\d+)", text).group(1))  # type: ignore[union-attr]
    ca = re.search(r"verify the server with (\S+)", text)
    return Served(process, port, metrics_port, health_port, ca.group(1) if ca else "", seen)


def stop(served: Served) -> int:
    served.process.terminate()
    return served.process.wait(timeout=10)


def wait_ready(served: Served, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while served.request("GET", "/readyz")[0] != 200:
        assert time.monotonic() < deadline, served.request("GET", "/readyz")
        time.sleep(0.05)


def wait_draining(served: Served, timeout: float = 10.0) -> None:
    """Until the server has handled SIGTERM: it then answers every request with "Connection:
    close", here one on a connection of its own."""
    deadline = time.monotonic() + timeout
    while True:
        probe = HTTPSConnection("127.0.0.1", served.port, context=served.context(), timeout=10)
        try:
            probe.request("GET", "/healthz")
            answer = probe.getresponse()
            answer.read()
            if answer.getheader("Connection") == "close":
                return
        finally:
            probe.close()
        assert time.monotonic() < deadline, "SIGTERM not handled in time"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("serve")
    config = tmp / "config.yaml"
    config.write_text(
        "rules:\n  prescheduled: {mode: warn, mutate: true}\n"
        # the server's own sections, as the Helm chart renders them
        "certificates: {mode: secret, service: draguard, namespace: draguard}\n"
        'tls: {minVersion: "1.3"}\nlogLevel: info\n'
    )
    server = start(
        "--state", str(EXAMPLES / "gpu-cluster"), "--config", str(config), "--cert-dir", str(tmp / "certs")
    )
    yield server
    assert stop(server) == 0


def example_pod() -> dict[str, Any]:
    return deepcopy(split(documents())[1])


def claim_review(expression: str) -> dict[str, Any]:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{"cel": {"expression": expression}}],
                        },
                    }
                ]
            }
        },
    }
    review = pod_review(claim)
    review["request"]["kind"] = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    review["request"]["resource"] = {
        "group": "resource.k8s.io",
        "version": "v1",
        "resource": "resourceclaims",
    }
    review["request"]["name"] = "c"
    return review


def test_decisions_and_warnings_over_verified_tls(served: Served) -> None:
    wait_ready(served)
    allowed = served.review(pod_review(example_pod()))
    assert allowed["allowed"] is True

    broken = served.review(claim_review('device.attributes["gpu.example.com"].model =='))
    assert broken["allowed"] is False
    assert broken["status"]["code"] == 403
    assert "selectors[0].cel.expression: invalid CEL expression" in broken["status"]["message"]

    no_match = served.review(claim_review('device.attributes["gpu.example.com"].model == "z100"'))
    assert no_match["allowed"] is True
    assert "matches none of" in no_match["warnings"][0]

    pod = example_pod()
    pod["spec"]["resourceClaims"] = "gpu"
    undecodable = served.review(pod_review(pod))
    assert undecodable["allowed"] is False and undecodable["status"]["code"] == 422
    assert (
        "object.spec.resourceClaims: Invalid value: 'gpu': must be a list" in undecodable["status"]["message"]
    )


def test_mutate_returns_a_json_patch(served: Served) -> None:
    pod = example_pod()
    pod["spec"]["nodeName"] = "node-1"
    response = served.review(pod_review(pod), "/mutate")
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"] for op in patch} >= {"/spec/nodeSelector"}
    assert "spec.nodeName" in response["warnings"][0]


def test_bad_calls_are_400_and_413_and_the_server_keeps_serving(served: Served) -> None:
    status, text = served.request("POST", "/validate", b"{")
    assert status == 400 and "body is not JSON" in text
    no_uid = pod_review(example_pod())
    del no_uid["request"]["uid"]
    status, text = served.request("POST", "/validate", json.dumps(no_uid).encode())
    assert status == 400 and "request.uid: Required value" in text
    status, _ = served.request("POST", "/validate", b" " * (3 * 1024 * 1024 + 1))
    assert status == 413
    assert served.review(pod_review(example_pod()))["allowed"] is True


def test_on_sigterm_open_connections_end_on_an_answer_before_the_server_exits(tmp_path: Path) -> None:
    """A client's keep-alive connection, opened before SIGTERM, carries one more review: answered,
    with "Connection: close" so the client does not send another on it (an idle connection the
    server closed under it was an EOF for the API server); then the server exits without waiting
    out the drain."""
    server = start("--state", str(EXAMPLES / "gpu-cluster"), "--cert-dir", str(tmp_path / "certs"))
    wait_ready(server)
    connection = HTTPSConnection("127.0.0.1", server.port, context=server.context(), timeout=10)
    body = json.dumps(pod_review(example_pod())).encode()
    headers = {"Content-Type": "application/json"}
    try:
        connection.request("POST", "/validate", body, headers)
        first = connection.getresponse()
        assert first.status == 200 and first.getheader("Connection") != "close"
        first.read()
        server.process.terminate()
        wait_draining(server)  # the signal handled: the server is draining, the connection still open
        connection.request("POST", "/validate", body, headers)
        last = connection.getresponse()
        assert last.status == 200, last.read()
        assert last.getheader("Connection") == "close"
        assert json.loads(last.read())["response"]["allowed"] is True
    finally:
        connection.close()
    ended = time.monotonic()
    assert server.process.wait(timeout=10) == 0
    assert time.monotonic() - ended < 2  # the last connection closed: no need to wait any longer


def test_probes_and_metrics(served: Served) -> None:
    assert served.request("GET", "/healthz") == (200, "ok")
    assert served.request("GET", "/readyz") == (200, "ok")
    assert served.probe("/healthz") == (200, "ok")
    assert served.probe("/readyz") == (200, "ok")
    served.review(pod_review(example_pod()))
    text = served.metrics()
    labels = r'decision="allowed",kind="Pod",operation="CREATE",webhook="validate"'
    line = re.search(r"draguard_admission_requests_total\{" + labels + r"\} (\S+)", text)
    assert line is not None and float(line.group(1)) >= 1
    assert 'draguard_snapshot_objects{kind="ResourceSlice"} 3.0' in text
    assert "draguard_snapshot_age_seconds 0.0" in text
    assert "draguard_admission_duration_seconds_bucket{" in text
    expiry = re.search(r"^draguard_cert_expiry_timestamp_seconds (\S+)$", text, re.M)
    assert expiry is not None and float(expiry.group(1)) > time.time()  # the generated pair's notAfter


def test_without_a_certificate_yet_the_probes_say_alive_and_not_ready(tmp_path: Path) -> None:
    # A replica waiting for its first pair (with selfManaged certificates the elected replica writes
    # it) must not be restarted by its liveness probe: the probes answer on their own plain-HTTP
    # port, where no handshake needs the certificate. Here the pair is valid only from tomorrow.
    tomorrow, month = dt.datetime.now(dt.UTC) + dt.timedelta(days=1), dt.timedelta(days=30)
    ca = generate_ca(tomorrow, month)
    pair = issue_serving(ca, ["127.0.0.1", "localhost"], tomorrow, month)
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    server = start(
        "--state", str(EXAMPLES / "gpu-cluster"), "--host", "127.0.0.1",
        "--tls-cert-file", str(tmp_path / "tls.crt"), "--tls-key-file", str(tmp_path / "tls.key"),
    )  # fmt: skip
    try:
        assert server.probe("/healthz") == (200, "ok")
        status, text = server.probe("/readyz")
        assert status == 503 and "no TLS certificate loaded yet" in text
        with pytest.raises(ssl.SSLError):
            server.request("GET", "/healthz", ca=str(tmp_path / "ca.crt"))
    finally:
        assert stop(server) == 0


def test_tls_min_version_comes_from_the_config(served: Served) -> None:
    context = served.context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    connection = HTTPSConnection("127.0.0.1", served.port, context=context, timeout=5)
    with pytest.raises(ssl.SSLError):
        connection.request("GET", "/healthz")
    connection.close()


def test_new_certificate_files_are_served_without_a_restart(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    server = start("--state", str(EXAMPLES / "gpu-cluster"), "--cert-dir", str(certs))
    try:
        assert server.request("GET", "/healthz")[0] == 200
        new_ca = generate_pair(str(tmp_path / "next"), None)
        for name in ("tls.key", "tls.crt"):  # as a Secret volume update: new files swapped in
            os.replace(tmp_path / "next" / name, certs / name)
        deadline = time.monotonic() + 5
        while True:
            try:
                assert server.request("GET", "/healthz", ca=new_ca)[0] == 200
                break
            except ssl.SSLError:
                assert time.monotonic() < deadline, "the new certificate was never served"
                time.sleep(0.1)
        with pytest.raises(ssl.SSLError):
            server.request("GET", "/healthz")  # the old CA no longer verifies it
        assert server.process.poll() is None
    finally:
        assert stop(server) == 0


def test_demo_prints_curls_that_answer_as_labelled_and_exits(tmp_path: Path) -> None:
    """The banner's four curls, run as printed: the example pod allowed, a claim denied with the
    reason, a claim allowed with a warning, and the pod's dry run."""
    server = start("--demo", "--exit-after", "20", log=tmp_path / "serve.log")
    try:
        labels = [line.strip() for line in server.lines if line.strip().startswith("# ")]
        curls = [line.strip() for line in server.lines if line.strip().startswith("curl ")]
        assert [label.split(":")[0] for label in labels] == [
            "# allowed",
            "# denied",
            "# allowed with a warning",
            "# dry run",
        ]
        answers = []
        for curl in curls:
            url = re.search(r"(https://\S+)$", curl).group(1)  # type: ignore[union-attr]
            assert url.startswith(f"https://127.0.0.1:{server.port}/")
            body = re.search(r"--data @(\S+)", curl).group(1)  # type: ignore[union-attr]
            if shutil.which("curl"):
                done = subprocess.run(
                    shlex.split(curl), capture_output=True, text=True, timeout=30, check=True
                )
                answers.append(json.loads(done.stdout))
            else:
                answers.append(
                    json.loads(
                        server.request("POST", url.split(str(server.port))[1], Path(body).read_bytes())[1]
                    )
                )
        allowed, denied, warned, dry_run = answers
        assert allowed["response"]["allowed"] is True and not allowed["response"].get("warnings")
        assert denied["response"]["allowed"] is False
        assert "Syntax error" in denied["response"]["status"]["message"]
        assert warned["response"]["allowed"] is True
        assert "matches none of the 10 devices" in warned["response"]["warnings"][0]
        assert dry_run["fits"] is True
        assert [n["node"] for n in dry_run["nodes"] if n["fits"]] == ["node-3"]
        ca = re.search(r"--cacert (\S+)", curls[0]).group(1)  # type: ignore[union-attr]
    finally:
        server.process.terminate()
    assert server.process.wait(timeout=10) == 0
    assert not Path(ca).exists()  # the temporary directory is cleaned up
    logged = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines()]
    assert any(ca in line["message"] for line in logged)  # the CA path is in the log, not only on stdout
    # The log says what the cluster holds, not how many Python objects were frozen for the GC.
    assert any(line["message"] == "cluster state synced: 11 objects" for line in logged)


def device_classes(served: Served) -> int:
    metric = r'^draguard_snapshot_objects\{kind="DeviceClass"\} (\S+)$'
    found = re.search(metric, served.metrics(), re.MULTILINE)
    return int(float(found[1])) if found else 0


def test_state_from_a_cluster_through_a_kubeconfig(tmp_path: Path, control_plane: ControlPlane) -> None:
    """The real API server of the session, through the admin's kubeconfig."""
    api = control_plane.client()
    name = f"serve-{tmp_path.name[-12:].lower().replace('_', '-')}"
    server = start("--kubeconfig", str(control_plane.admin_kubeconfig), "--cert-dir", str(tmp_path / "certs"))
    try:
        wait_ready(server, timeout=30)
        listed = device_classes(server)
        body = {"metadata": {"name": name}, "spec": {}}
        made = call(api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", body)
        assert made.status == 201, made.body
        deadline = time.monotonic() + 10
        while device_classes(server) != listed + 1:
            assert time.monotonic() < deadline, server.metrics()
            time.sleep(0.05)
    finally:
        call(api, "DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{name}")
        assert stop(server) == 0


# --- the strict cluster of examples/policy-tests (personas enforced, drains guarded) ------------------

POLICY_TESTS = EXAMPLES / "policy-tests"
ADMIN = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The config and state of examples/policy-tests/strict-cluster.yaml, served: the webhook must
    agree with ``draguard test`` on the same files. Reviews go to the per-rule paths, as the chart's
    webhooks send them."""
    state = [str(EXAMPLES / "gpu-cluster"), str(EXAMPLES / "workloads"), str(POLICY_TESTS / "state")]
    server = start(
        *(arg for path in state for arg in ("--state", path)),
        "--config", str(POLICY_TESTS / "draguard-strict.yaml"),
        "--cert-dir", str(tmp_path_factory.mktemp("strict") / "certs"),
    )  # fmt: skip
    wait_ready(server)
    yield server
    assert stop(server) == 0


def review_of(obj: dict[str, Any], resource: str, user: dict[str, Any], **request: Any) -> dict[str, Any]:
    """The review the API server sends for creating ``obj`` (a ``resource`` of its apiVersion)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    review = pod_review(obj)
    review["request"].update(
        kind={"group": group, "version": version, "kind": obj["kind"]},
        resource={"group": group, "version": version, "resource": resource},
        namespace=obj["metadata"].get("namespace"),
        userInfo=user,
        **request,
    )
    return review


def eviction(name: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "gpu-driver"}
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": metadata}
    review = review_of(body, "pods", {"username": "system:serviceaccount:kube-system:node-drainer"})
    review["request"]["resource"] = {"group": "", "version": "v1", "resource": "pods"}
    review["request"]["subResource"] = "eviction"
    return review


def test_drain_guard_holds_the_driver_while_its_devices_are_in_use(strict: Served) -> None:
    # The driver pods reference no claim: the snapshot must keep them because drain names them.
    held = strict.review(eviction("gpu-plugin-node-1"), "/validate/drain")
    assert held["allowed"] is False
    assert "claims team-a/running-job are still reserved by workload pods" in held["status"]["message"]
    assert strict.review(eviction("gpu-plugin-node-3"), "/validate/drain")["allowed"] is True


def test_personas_keep_device_classes_to_admins(strict: Served) -> None:
    device_class = yaml.safe_load((POLICY_TESTS / "objects" / "class-h100.yaml").read_text())
    alice = {"username": "alice", "groups": ["system:authenticated"]}
    refused = strict.review(review_of(device_class, "deviceclasses", alice), "/validate/personas")
    assert refused["allowed"] is False
    assert "only admins (groups system:masters) may" in refused["status"]["message"]
    assert strict.review(review_of(device_class, "deviceclasses", ADMIN), "/validate/personas")["allowed"]


def test_a_pinned_pod_is_rewritten_and_refused_if_it_arrives_unrewritten(strict: Served) -> None:
    pod = yaml.safe_load((POLICY_TESTS / "objects" / "pinned-pod-template.yaml").read_text())
    # The validating webhook sees the pod as sent when the mutating one is off or failed open.
    refused = strict.review(pod_review(pod), "/validate/prescheduled")
    assert refused["allowed"] is False
    assert "Use a kubernetes.io/hostname node selector instead" in refused["status"]["message"]
    rewritten = strict.review(pod_review(pod), "/mutate/prescheduled")
    patch = json.loads(base64.b64decode(rewritten["patch"]))
    assert patch == [
        {"op": "remove", "path": "/spec/nodeName"},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "node-3"}},
    ]


# --- POST /v1/dryrun on the serve port ------------------------------------------------------------------


def dry_run(served: Served, cert: tuple[str, str] | None = None) -> tuple[int, Any]:
    context = served.context()
    if cert is not None:
        context.load_cert_chain(*cert)
    connection = HTTPSConnection("127.0.0.1", served.port, context=context, timeout=30)
    try:
        body = json.dumps({"pod": example_pod()}).encode()
        connection.request("POST", "/v1/dryrun", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_the_dry_run_is_served_and_asks_who_calls(served: Served, tmp_path: Path) -> None:
    # served has no client CA and no cluster: nobody can authenticate.
    status, answer = dry_run(served)
    assert status == 401, answer
    assert served.request("GET", "/v1/openapi.json")[0] == 200

    now, day = dt.datetime.now(dt.UTC), dt.timedelta(days=1)
    client_ca = generate_ca(now, day)
    client = issue_client(client_ca, "ci-bot", ("platform",), now, day)
    files = {name: tmp_path / name for name in ("client-ca.crt", "client.crt", "client.key")}
    files["client-ca.crt"].write_bytes(client_ca.cert_pem)
    files["client.crt"].write_bytes(client.cert_pem)
    files["client.key"].write_bytes(client.key_pem)
    server = start(
        "--state", str(EXAMPLES / "gpu-cluster"), "--state", str(EXAMPLES / "workloads"),
        "--cert-dir", str(tmp_path / "certs"), "--dryrun-client-ca", str(files["client-ca.crt"]),
    )  # fmt: skip
    try:
        wait_ready(server)
        status, answer = dry_run(server, (str(files["client.crt"]), str(files["client.key"])))
        assert status == 200, answer
        fits = [n["node"] for n in answer["nodes"] if n["fits"]]
        assert fits and answer["checked"] == 3
        assert dry_run(server)[0] == 401  # the same server, no certificate
    finally:
        assert stop(server) == 0


def test_the_demo_dry_run_is_open(tmp_path: Path) -> None:
    server = start("--demo", "--exit-after", "20")
    try:
        status, answer = dry_run(server)
        assert status == 200 and answer["checked"] == 3
    finally:
        stop(server)
