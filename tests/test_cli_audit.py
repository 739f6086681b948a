"""``draguard audit`` end to end: manifests, a cluster (through a stand-in API server), the outputs."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from webhook.cli import main
from webhook.manifests import read_documents

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLUSTER = EXAMPLES / "gpu-cluster"
WORKLOADS = EXAMPLES / "workloads"
TOKEN = "audit-test-token"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


STUCK_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: stuck, namespace: team-a}
spec:
  nodeName: node-2
  resourceClaims: [{name: gpus, resourceClaimName: three-a100}]
  containers: [{name: main, image: app:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: half-pool}
spec:
  driver: nic.example.com
  nodeName: node-1
  pool: {name: nics, generation: 1, resourceSliceCount: 2}
  devices: [{name: nic-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: broken, namespace: team-b}
spec: {devices: {requests: "all of them"}}
"""


@pytest.fixture
def troubled(tmp_path: Path) -> Path:
    (tmp_path / "extra.yaml").write_text(STUCK_POD)
    return tmp_path / "extra.yaml"


def test_a_healthy_cluster_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-f", str(CLUSTER), "-f", str(WORKLOADS))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "no findings"
    assert lines[1].startswith("audited 12 objects: 0 fail, 0 warn, 0 error, ")
    assert "\raudit [" not in err  # stderr is not a terminal here: no progress bar


def test_findings_are_listed_with_rule_resource_and_message(
    capsys: pytest.CaptureFixture[str], troubled: Path
) -> None:
    code, out, err = run(capsys, "-f", str(CLUSTER), "-f", str(troubled))
    assert code == 1
    assert err == (
        "note: skipped 1 Deployment document: a workload, not a pod of the cluster (validate and allocate "
        "check its pod template) (--skip-kinds Deployment to silence this)\n"
    )
    header, *rows, summary = out.splitlines()
    assert header.split() == ["RESULT", "RULE", "RESOURCE", "MESSAGE"]
    by_rule = {row.split()[1]: row for row in rows}
    assert by_rule["prescheduled"].startswith("fail")
    assert "Pod team-a/stuck" in by_rule["prescheduled"]
    assert "claim team-a/three-a100 is not allocated" in by_rule["prescheduled"]
    assert (
        "pool nic.example.com/nics (generation 1): 1 ResourceSlices published" in by_rule["incomplete-pools"]
    )
    assert by_rule["undecodable-objects"].startswith("error")
    assert f"{troubled}: document 4: spec.devices.requests" in by_rule["undecodable-objects"]
    # 10 objects of the example cluster, the pod and the slice; the claim could not be read.
    assert re.fullmatch(r"audited 12 objects: 2 fail, \d+ warn, 1 error, \d+ pass, 0 skip", summary)


def test_json_holds_every_result(capsys: pytest.CaptureFixture[str], troubled: Path) -> None:
    code, out, _ = run(capsys, "-f", str(CLUSTER), "-f", str(troubled), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert list(doc) == ["apiVersion", "kind", "objects", "summary", "findings"]
    assert (doc["apiVersion"], doc["kind"]) == ("draguard.io/v1alpha1", "AuditReport")
    counted = {r: sum(f["result"] == r for f in doc["findings"]) for r in doc["summary"]}
    assert doc["summary"] == counted and counted["pass"] > 0 and counted["fail"] == 2
    first = doc["findings"][0]
    assert list(first) == ["category", "rule", "result", "message", "resources"]


def test_policyreports_can_be_applied_as_is(capsys: pytest.CaptureFixture[str], troubled: Path) -> None:
    code, out, _ = run(capsys, "-f", str(CLUSTER), "-f", str(troubled), "-o", "policyreport")
    assert code == 1
    reports = list(yaml.safe_load_all(out))
    assert [(r["kind"], r["metadata"].get("namespace")) for r in reports] == [
        ("PolicyReport", "team-a"),
        ("PolicyReport", "team-b"),
        ("ClusterPolicyReport", None),
    ]
    assert sum(r["summary"]["fail"] for r in reports) == 2
    assert reports[1]["summary"]["error"] == 1
    pool = [x for x in reports[2]["results"] if x["rule"] == "incomplete-pools" and x["result"] == "fail"]
    assert pool[0]["resources"] == [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "name": "half-pool"}
    ]


def test_a_pod_whose_template_could_not_be_read_is_not_said_to_miss_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A driver demo in an older version: its claim template is an error (not served), and the pod
    next to it is not judged on a template "not found" that is right there in the same file."""
    demo = tmp_path / "demo.yaml"
    demo.write_text(
        "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\n"
        "metadata: {name: one-gpu, namespace: team-a}\n"
        "spec: {spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.example.com}]}}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\n"
        "spec:\n  containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]\n"
        "  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n"
    )
    code, out, _ = run(capsys, "-f", str(CLUSTER), "-f", str(demo), "-o", "json")
    assert code == 1
    findings = {f["rule"]: f for f in json.loads(out)["findings"] if f["result"] != "pass"}
    assert set(findings) == {"undecodable-objects", "unschedulable-pods"}
    assert findings["undecodable-objects"]["result"] == "error"
    pod = findings["unschedulable-pods"]
    assert pod["result"] == "skip" and "not found" not in pod["message"]
    assert pod["message"] == (
        "pod team-a/p is not judged: ResourceClaimTemplate team-a/one-gpu, in the input, could not be "
        "read (see undecodable-objects)"
    )


def audited_and_validated(
    capsys: pytest.CaptureFixture[str], file: Path, label: str
) -> tuple[int, list[dict[str, Any]], str]:
    """audit -f of the example cluster and ``file``: its exit code and findings; and what validate
    of ``file`` alone says first of the object ``label`` (validate must refuse it)."""
    code, out, _ = run(capsys, "-f", str(CLUSTER), "-f", str(file), "-o", "json")
    validated = main(["validate", "-f", str(file)])
    problem = capsys.readouterr().out.splitlines()[0].split(f": {label}: ")[1]
    assert validated == 1
    return code, json.loads(out)["findings"], problem


def test_a_pod_the_priority_plugin_refuses_is_an_error_as_validate_says_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No cluster holds a pod its API server would not admit, so it is not audited: audit and
    validate agree on the same file. Unlike what validation says of an object (a warning below), the
    Priority admission plugin's refusal stays an error (the class listed before it is audited too)."""
    refused = tmp_path / "refused.yaml"
    refused.write_text(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: batch}\nvalue: 100\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: etl, namespace: team-a}\n"
        "spec: {priorityClassName: nightly, containers: [{name: main, image: etl:1}]}\n"
    )
    code, findings, problem = audited_and_validated(capsys, refused, "Pod team-a/etl")
    assert code == 1
    (finding,) = [f for f in findings if f["result"] != "pass"]
    assert (finding["rule"], finding["result"]) == ("undecodable-objects", "error")
    assert finding["message"] == f"Pod team-a/etl is not valid: {refused}: document 2: {problem}"


def test_what_validate_refuses_of_an_existing_object_is_a_warning_and_it_is_audited(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The cluster holds it, so it is audited as kube-scheduler sees it, and what the API server's
    validation says of it is an invalid-objects warning, worded as validate words it, saying that
    a claim's spec is not validated again once stored (audit said "no findings" before issue 15,
    and refused to audit it as an error before issue 24)."""
    claim = tmp_path / "claim.yaml"
    claim.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: team-a}\n"
        "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, "
        "allocationMode: Exactcount}}]}}\n"
    )
    code, findings, problem = audited_and_validated(capsys, claim, "ResourceClaim team-a/c")
    (finding,) = [f for f in findings if f["rule"] == "invalid-objects"]
    assert finding["result"] == "warn"
    assert finding["message"] == (
        f"ResourceClaim team-a/c: the API server's validation says: {claim}: document 1: {problem} "
        "(on create only: the API server lets an object it already holds keep it)"
    )
    audited = {f["rule"] for f in findings if f["resources"][0]["name"] == "c"}
    assert {"selectors", "unmatched-selectors"} <= audited
    assert code == (1 if any(f["result"] in ("fail", "error") for f in findings) else 0)


def test_unusable_input_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert (code, err) == (2, f"error: {tmp_path / 'nope.yaml'}: no such file or directory\n")
    config = tmp_path / "draguard.yaml"
    config.write_text("rules:\n  prescheduled: {mode: block}\n")
    code, _, err = run(capsys, "-f", str(CLUSTER), "--config", str(config))
    assert code == 2
    assert err.startswith(f"error: --config {config}: rules.prescheduled.mode: Invalid value: 'block'")
    code, _, err = run(capsys, "-f", str(CLUSTER), "--features", "fast")
    assert code == 2 and "unknown allocator feature(s) fast" in err


def test_the_config_decides_the_modes(
    capsys: pytest.CaptureFixture[str], troubled: Path, tmp_path: Path
) -> None:
    config = tmp_path / "draguard.yaml"
    config.write_text("rules:\n  prescheduled: {mode: warn}\n")
    _, out, _ = run(capsys, "-f", str(CLUSTER), "-f", str(troubled), "--config", str(config), "-o", "json")
    results = {f["rule"]: f["result"] for f in json.loads(out)["findings"] if f["rule"] == "prescheduled"}
    assert results == {"prescheduled": "warn"}


def test_audit_takes_the_config_file_serve_takes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One file for every command (issue 28): the server's own sections, as the chart renders them,
    are checked and left alone; a misspelt key is named with the key that was meant."""
    config = tmp_path / "draguard.yaml"
    config.write_text(
        "rules:\n  prescheduled: {mode: warn}\nlogLevel: debug\ntls: {minVersion: '1.3'}\n"
        "certificates: {mode: selfManaged, service: draguard, namespace: n, caValidity: 87600h}\n"
    )
    code, out, err = run(capsys, "-f", str(CLUSTER), "--config", str(config), "-o", "json")
    assert err == "" and code in (0, 1)
    assert json.loads(out)["findings"] is not None
    config.write_text("rules:\n  quota: {modee: audit}\nlogLevel: debug\n")
    code, _, err = run(capsys, "-f", str(CLUSTER), "--config", str(config))
    misspelt = "rules.quota.modee: unknown field; did you mean mode?"
    assert (code, err) == (2, f"error: --config {config}: {misspelt}\n")


# --- --kubeconfig --------------------------------------------------------------------------------

PATHS = {
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "Pod": "/api/v1/pods",
    "ResourceQuota": "/api/v1/resourcequotas",
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
}


class ApiServerStandIn(http.server.ThreadingHTTPServer):
    """Stands in for kube-apiserver, which cannot be installed here: it answers the cluster-wide list
    calls ``draguard audit --kubeconfig`` makes, as the API server does: items without apiVersion
    and kind (the list carries them), at most ``page`` items per page with a ``continue`` token,
    404 for a collection it does not serve, 401 without the bearer token, and any status a test
    sets in ``fail`` for a path."""

    def __init__(self, collections: dict[str, list[dict[str, Any]]], page: int = 2) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.collections = collections
        self.page = page
        self.fail: dict[str, int] = {}
        self.requests: list[str] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ApiServerStandIn

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.server.requests.append(self.path)
        query = parse_qs(url.query)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._answer(401, {"kind": "Status", "code": 401, "message": "Unauthorized"})
        if url.path in self.server.fail:
            code = self.server.fail[url.path]
            return self._answer(code, {"kind": "Status", "code": code, "message": f"{url.path} is forbidden"})
        if url.path not in self.server.collections:
            return self._answer(
                404, {"kind": "Status", "code": 404, "message": "the server could not find it"}
            )
        items = self.server.collections[url.path]
        start = int(query.get("continue", ["0"])[0])
        end = start + min(self.server.page, int(query.get("limit", ["500"])[0]))
        metadata = {"resourceVersion": "42", **({"continue": str(end)} if end < len(items) else {})}
        self._answer(
            200, {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": items[start:end]}
        )

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def as_listed(*paths: Path) -> dict[str, list[dict[str, Any]]]:
    """The manifests as the API server lists them, by collection path."""
    collections: dict[str, list[dict[str, Any]]] = {path: [] for path in PATHS.values()}
    for doc in read_documents([str(p) for p in paths]):
        item = {k: v for k, v in doc.raw.items() if k not in ("apiVersion", "kind")}
        collections[PATHS[doc.raw["kind"]]].append(item)
    return collections


@pytest.fixture
def apiserver() -> Iterator[ApiServerStandIn]:
    server = ApiServerStandIn(as_listed(CLUSTER, WORKLOADS))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def kubeconfig(apiserver: ApiServerStandIn, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [
                    {"name": "test", "cluster": {"server": f"http://127.0.0.1:{apiserver.server_address[1]}"}}
                ],
                "users": [{"name": "test", "user": {"token": TOKEN}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            }
        )
    )
    return path


def test_a_cluster_is_audited_like_its_manifests(
    capsys: pytest.CaptureFixture[str], apiserver: ApiServerStandIn, kubeconfig: Path
) -> None:
    code, out, err = run(capsys, "--kubeconfig", str(kubeconfig), "-o", "json")
    assert code == 0, err
    _, from_files, _ = run(capsys, "-f", str(CLUSTER), "-f", str(WORKLOADS), "-o", "json")
    listed, read = json.loads(out), json.loads(from_files)
    assert (listed["objects"], listed["summary"]) == (read["objects"], read["summary"])
    # The same findings; their order follows the input's (files, or the lists by resource).
    assert sorted(map(json.dumps, listed["findings"])) == sorted(map(json.dumps, read["findings"]))
    slices = [r for r in apiserver.requests if r.startswith(PATHS["ResourceSlice"])]
    assert len(slices) == 2  # three slices, two per page: the continue token was followed
    assert any(r.startswith("/apis/resource.k8s.io/v1beta2/devicetaintrules") for r in apiserver.requests)


def test_a_cluster_that_refuses_a_list_is_unusable_input(
    capsys: pytest.CaptureFixture[str], apiserver: ApiServerStandIn, kubeconfig: Path
) -> None:
    apiserver.fail[PATHS["Pod"]] = 403
    code, out, err = run(capsys, "--kubeconfig", str(kubeconfig))
    assert (code, out) == (2, "")
    assert err == f"error: --kubeconfig {kubeconfig}: HTTP 403: /api/v1/pods is forbidden\n"


def test_a_kubeconfig_that_cannot_be_used(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    code, _, err = run(capsys, "--kubeconfig", str(missing))
    assert (code, err) == (2, f"error: kubeconfig {missing}: cannot read: No such file or directory\n")


def test_kubeconfig_env_lists_several_files_and_context_picks_one(
    capsys: pytest.CaptureFixture[str],
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$KUBECONFIG is a ':'-separated list, merged as kubectl merges it (missing files passed over);
    the first current-context wins, and --context chooses another."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(
        yaml.safe_dump(
            {
                "current-context": "nowhere",
                "clusters": [{"name": "nowhere", "cluster": {"server": "http://127.0.0.1:1"}}],
                "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "test"}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{elsewhere}:{kubeconfig}")
    code, _, err = run(capsys)
    assert (code, err) == (
        2,
        "error: the cluster: cannot reach the API server at http://127.0.0.1:1: " + "Connection refused\n",
    )
    code, out, err = run(capsys, "--context", "test")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("audited 12 objects")

