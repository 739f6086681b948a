"""POST /v1/dryrun end to end over HTTPS on 127.0.0.1: authentication, bounds, answers, OpenAPI.

The cluster: three nodes with four GPUs each (selectors on attributes only), some already taken,
a pod asking for one GPU through a template. TLS material comes from certs.material. Bearer
tokens (TokenReview) and authorization (SubjectAccessReview) need a real API server: they are
tested in ``tests/kube/test_e2e_dryrun.py``; here an API server that does not answer shows that a
caller without credentials is refused before anything is asked, and that one with a token is told
the server cannot check it now.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import io
import json
import socket
import ssl
import threading
from collections.abc import AsyncIterator
from contextlib import redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
import yaml
from aiohttp import web
from kubernetes import client as kube

from certs.material import KeyPair, generate_ca, issue_client, issue_serving
from certs.reloader import CertReloader
from policies.api.kinds import decode
from policies.snapshot import Snapshot
from webhook import cli, schemas
from webhook import dryrun_api as api
from webhook.dryrun_api import DryRunSettings, add_dryrun_routes
from webhook.state import FileState

DRIVER = "gpu.example.com"
NS = "team-a"
NOW = dt.datetime.now(dt.UTC)
DAY = dt.timedelta(days=1)
# node -> GPUs already taken; with a one-GPU pod, node-c strands 0, node-a 1, node-b 3.
TAKEN = {"node-a": 2, "node-b": 0, "node-c": 3}


# --- the cluster ------------------------------------------------------------------------------------


def gpu_slice(node: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": "a100"}, "index": {"int": i}},
            "nodeAllocatableResourceMappings": {"memory": {"allocationMultiplier": "2Gi"}},
        }
        for i in range(4)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str, count: int, node: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}
        },
    }
    if node is not None:
        results = [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"} for i in range(count)
        ]
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        obj["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": selector}}
    return obj


def template(name: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]
                }
            }
        },
    }


def pod(*refs: dict[str, str], name: str = "trainer") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resourceClaims": list(refs),
            "containers": [
                {
                    "name": "main",
                    "image": "trainer:1",
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": r["name"]} for r in refs]},
                }
            ],
        },
    }


def cluster_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "h100"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "h100"'}}]
            },
        },
        template("one-gpu"),
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "claims", "namespace": NS},
            "spec": {"hard": {"count/resourceclaims.resource.k8s.io": "2"}},
            "status": {
                "hard": {"count/resourceclaims.resource.k8s.io": "2"},
                "used": {"count/resourceclaims.resource.k8s.io": "2"},
            },
        },
    ]
    for node, taken in TAKEN.items():
        objects.append(node_object(node))
        objects.append(gpu_slice(node))
        if taken:
            objects.append(claim(f"busy-{node}", taken, node))
    objects.append(BUSY_CPU)
    return objects


def node_object(name: str) -> dict[str, Any]:
    status = {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


# Load on node-b: 6 of its 8 CPUs, so the default scoring (least allocated, balanced) ranks it last.
BUSY_CPU = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "busy-cpu", "namespace": "other"},
    "spec": {
        "nodeName": "node-b",
        "containers": [{"name": "c", "image": "batch:1", "resources": {"requests": {"cpu": "6"}}}],
    },
}


def snapshot_of(objects: list[dict[str, Any]]) -> Snapshot:
    return FileState.from_objects((decode(o) for o in objects), NOW).snapshot


# --- TLS ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tls:
    dir: Path
    server_ca: KeyPair
    client_ca: KeyPair

    def file(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)

    def server_context(self, client_ca: bool) -> ssl.SSLContext:
        """The serving context as draguard serve builds it: CertReloader, asking for client certificates
        of the client CA when ``client_ca``."""
        serving = issue_serving(self.server_ca, ["127.0.0.1"], NOW, DAY)
        reloader = CertReloader(
            self.file("tls.crt", serving.cert_pem),
            self.file("tls.key", serving.key_pem),
            client_ca_file=self.file("client-ca.crt", self.client_ca.cert_pem) if client_ca else None,
        )
        assert reloader.reload()
        return reloader.server_context

    def client_context(self, cert: KeyPair | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.server_ca.cert_pem.decode())
        if cert is not None:
            context.load_cert_chain(
                self.file("client.crt", cert.cert_pem), self.file("client.key", cert.key_pem)
            )
        return context


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls(tmp_path_factory.mktemp("tls"), generate_ca(NOW, DAY), generate_ca(NOW, DAY))


def api_client(url: str) -> kube.ApiClient:
    return kube.ApiClient(kube.Configuration(host=url))


# --- serving and calling ------------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    tls: Tls

    async def post(
        self,
        body: Any,
        *,
        token: str | None = None,
        cert: KeyPair | None = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
        connector = aiohttp.TCPConnector(ssl=self.tls.client_context(cert))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(self.url + api.DRYRUN_PATH, data=data, headers=sent) as response,
        ):
            return response.status, await response.json(content_type=None), response.headers

    async def get(self, path: str) -> tuple[int, Any]:
        connector = aiohttp.TCPConnector(ssl=self.tls.client_context())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(self.url + path) as response,
        ):
            return response.status, await response.json()


DEMO = DryRunSettings(demo=True)


@pytest.fixture
async def serve(aiohttp_server: Any, tls: Tls) -> AsyncIterator[Any]:
    clients: list[kube.ApiClient] = []

    async def start(
        settings: DryRunSettings = DEMO,
        snapshot: Snapshot | None = None,
        *,
        apiserver_url: str | None = None,
        clock: Any = None,
        provider: Any = None,
    ) -> Served:
        app = web.Application()
        client = api_client(apiserver_url) if apiserver_url else None
        if client is not None:
            clients.append(client)
        state = snapshot if snapshot is not None else snapshot_of(cluster_objects())
        extra = {"clock": clock} if clock is not None else {}
        add_dryrun_routes(app, provider or (lambda: state), settings, api_client=client, **extra)
        server = await aiohttp_server(
            app, ssl=tls.server_context(client_ca=settings.client_ca_file is not None)
        )
        return Served(f"https://127.0.0.1:{server.port}", tls)

    yield start
    for c in clients:
        c.close()


ONE_GPU_POD = {"pod": pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"})}


# --- answers ------------------------------------------------------------------------------------------


async def test_fitting_nodes_come_ranked_by_the_default_scoring_with_footprint_and_quota(serve: Any) -> None:
    served = await serve()
    status, body, _ = await served.post(ONE_GPU_POD)
    assert status == 200, body
    assert body["claims"] == [f"{NS}/trainer-gpu"]
    assert (body["checked"], body["total"], body["fitting"], body["complete"]) == (3, 3, 3, True)
    # node-b's bound pod takes 6 of its 8 CPUs: least allocated scores it lower (balanced
    # allocation, which 1.36 scores by how much the pod improves the balance, slightly higher);
    # node-a and node-c tie (the scheduler picks one at random), listed by name.
    assert [(n["node"], n["rank"], n["stranded"]) for n in body["nodes"]] == [
        ("node-a", 1, 1),
        ("node-c", 1, 0),
        ("node-b", 3, 3),
    ]
    assert body["preferred"] == ["node-a", "node-c"]
    assert body["nodes"][0]["scores"] == {
        "TaintToleration": 300,
        "NodeAffinity": 0,
        "NodeResourcesFit": 93,
        "PodTopologySpread": 0,
        "ImageLocality": 0,
        "InterPodAffinity": 0,
        "DynamicResources": 0,
        "NodeResourcesBalancedAllocation": 71,
    }
    assert body["nodes"][2]["scores"]["NodeResourcesFit"] == 55
    assert body["nodes"][2]["scores"]["NodeResourcesBalancedAllocation"] == 72
    best = body["nodes"][1]
    chosen = best["results"][0]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in chosen] == [("node-c", "gpu-3")]
    # one device mapping 2Gi of memory (KEP-5517), and the pod's own cpu request next to it
    assert best["footprint"] == {"memory": "2Gi"}
    assert best["quota"]["charge"]["requests.memory"] == "2Gi"
    assert best["quota"]["charge"]["requests.cpu"] == "1"
    # the template creates a claim; the namespace already uses both claims it may have
    assert best["quota"]["exceeded"].startswith("exceeded quota: claims, requested: count/resourceclaims")
    assert body["elapsedMs"] >= 0


async def test_nodes_that_do_not_fit_come_last_with_their_explanation(serve: Any) -> None:
    served = await serve()
    three = {
        "pod": pod({"name": "gpu", "resourceClaimTemplateName": "three"}),
        "claimTemplates": [template("three", 3)],
    }
    status, body, _ = await served.post(three)
    assert status == 200, body
    assert [(n["node"], n["fits"]) for n in body["nodes"]] == [
        ("node-b", True),
        ("node-a", False),
        ("node-c", False),
    ]
    refused = body["nodes"][1]
    assert refused["results"] == [None]
    assert (refused["plugin"], refused["reasons"]) == ("DynamicResources", ["cannot allocate all claims"])
    assert "needs 3 devices" in refused["detail"]
    assert refused["explanation"]["requests"][0]["wanted"] == 3
    assert "rank" not in refused and "footprint" not in refused


async def test_the_answer_is_the_allocate_commands_on_the_same_state(serve: Any, tmp_path: Path) -> None:
    objects = cluster_objects()
    request = {
        "pod": pod(
            {"name": "gpu", "resourceClaimTemplateName": "two"},
            {"name": "extra", "resourceClaimName": "extra"},
        ),
        "claimTemplates": [template("two", 2)],
        "claims": [claim("extra", 1)],
        "limit": 10,
    }
    served = await serve()
    status, body, _ = await served.post(request)
    assert status == 200, body

    manifests = [*objects, request["pod"], *request["claimTemplates"], *request["claims"]]
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all(manifests))
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["allocate", "-f", str(tmp_path), "-o", "json"])
    assert code == 0
    (answer,) = json.loads(out.getvalue())["pods"]
    assert {n["node"]: n for n in body["nodes"]} == {n["node"]: n for n in answer["nodes"]}
    assert (body["apiVersion"], body["kind"]) == ("draguard.io/v1alpha1", "DryRunResponse")
    assert {k: v for k, v in body.items() if k not in ("nodes", "elapsedMs", "apiVersion", "kind")} == {
        k: v for k, v in answer.items() if k != "nodes"
    }


async def test_a_claim_allocated_already_is_checked_on_its_node_not_allocated_again(serve: Any) -> None:
    served = await serve()
    status, body, _ = await served.post({"pod": pod({"name": "gpu", "resourceClaimName": "busy-node-a"})})
    assert status == 200, body
    assert [(n["node"], n["fits"]) for n in body["nodes"]] == [
        ("node-a", True),
        ("node-b", False),
        ("node-c", False),
    ]
    kept = body["nodes"][0]["results"][0]["devices"]["results"]
    assert [r["device"] for r in kept] == ["gpu-0", "gpu-1"]
    assert body["nodes"][1]["reasons"] == ["resourceclaim not available on the node"]


async def test_claims_without_a_pod_and_a_node_list_and_a_limit(serve: Any) -> None:
    served = await serve()
    status, body, _ = await served.post(
        {"claims": [claim("solo", 2)], "nodes": ["node-c", "node-b"], "limit": 1}
    )
    assert status == 200, body
    assert body["claims"] == [f"{NS}/solo"]
    assert (body["checked"], body["total"], body["fitting"]) == (2, 2, 1)
    assert [n["node"] for n in body["nodes"]] == ["node-b"]
    # no pod: nothing but what the devices yield and the claim object itself is charged
    assert body["nodes"][0]["quota"]["charge"]["requests.memory"] == "4Gi"
    assert "requests.cpu" not in body["nodes"][0]["quota"]["charge"]


async def test_a_limit_lists_the_first_entries_of_the_whole_answer(serve: Any) -> None:
    """Answers past the limit are dropped as the nodes are asked, not at the end: what is listed is
    still the whole answer's first entries, fitting ones best first, then the others by name."""
    objects = cluster_objects()
    for node in ("node-d", "node-e", "node-f"):  # 4 free GPUs each: two fit a pod wanting 3, all one
        objects += [node_object(node), gpu_slice(node)]
    served = await serve(replace(DEMO, burst=20), snapshot=snapshot_of(objects))
    three = {
        "pod": pod({"name": "gpu", "resourceClaimTemplateName": "three"}),
        "claimTemplates": [template("three", 3)],
    }
    for request in (ONE_GPU_POD, three):
        status, whole, _ = await served.post({**request, "limit": 10})
        assert status == 200, whole
        assert len(whole["nodes"]) == 6
        for limit in range(1, 6):
            _, body, _ = await served.post({**request, "limit": limit})
            assert body["nodes"] == whole["nodes"][:limit], limit
            assert (body["checked"], body["fitting"]) == (whole["checked"], whole["fitting"])


async def test_nodes_whose_devices_yield_nothing_have_an_empty_footprint(serve: Any) -> None:
    """Prices are shared between answers that pick the same devices yielding node resources (here:
    none on node-d and node-e), never between answers that pick different ones."""
    objects = cluster_objects()
    for node in ("node-d", "node-e"):
        plain = gpu_slice(node)
        for device in plain["spec"]["devices"]:
            del device["nodeAllocatableResourceMappings"]
        objects += [node_object(node), plain]
    served = await serve(snapshot=snapshot_of(objects))
    status, body, _ = await served.post({**ONE_GPU_POD, "limit": 10})
    assert status == 200, body
    footprints = {n["node"]: n["footprint"] for n in body["nodes"]}
    assert footprints == {
        "node-a": {"memory": "2Gi"},
        "node-b": {"memory": "2Gi"},
        "node-c": {"memory": "2Gi"},
        "node-d": {},
        "node-e": {},
    }
    charges = {n["node"]: n["quota"]["charge"] for n in body["nodes"]}
    assert "requests.memory" not in charges["node-d"] and charges["node-d"] == charges["node-e"]
    assert charges["node-a"]["requests.memory"] == "2Gi"


async def test_each_request_answers_afresh_on_the_current_snapshot(serve: Any) -> None:
    """The allocator is built once per snapshot and forked per request, and selector results carry
    over between snapshots: a repeated request answers the same, and a newer snapshot's devices and
    allocations are what the next request sees."""
    objects = cluster_objects()
    current = [snapshot_of(objects)]
    served = await serve(provider=lambda: current[0])
    h100 = {
        "pod": pod({"name": "gpu", "resourceClaimTemplateName": "h100"}),
        "claimTemplates": [
            {
                **template("h100"),
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "h100", "count": 1}}]
                        }
                    }
                },
            }
        ],
    }

    def nodes(body: dict[str, Any]) -> list[tuple[str, bool, str | None]]:
        return [(n["node"], n["fits"], n.get("detail")) for n in body["nodes"]]

    _, first, _ = await served.post(ONE_GPU_POD)
    _, again, _ = await served.post(ONE_GPU_POD)
    assert first["nodes"] == again["nodes"]
    _, none, _ = await served.post(h100)
    assert none["fitting"] == 0

    # node-c's GPUs are h100s now (a new slice object), and node-b is full.
    changed = []
    for obj in objects:
        if obj["kind"] == "ResourceSlice" and obj["spec"]["nodeName"] == "node-c":
            for device in obj["spec"]["devices"]:
                device["attributes"]["model"] = {"string": "h100"}
        changed.append(obj)
    changed.append(claim("busy-node-b", 4, "node-b"))
    current[0] = snapshot_of(changed)

    _, after, _ = await served.post(ONE_GPU_POD)
    assert [(n, fits) for n, fits, _ in nodes(after)] == [
        ("node-a", True),
        ("node-c", True),
        ("node-b", False),
    ]
    _, some, _ = await served.post(h100)
    assert [(n, fits) for n, fits, _ in nodes(some)] == [
        ("node-c", True),
        ("node-a", False),
        ("node-b", False),
    ]
    assert some["nodes"][0]["results"][0]["devices"]["results"][0]["device"] == "gpu-3"


# --- input bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"pod": pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}), "limit": "3"},
            "limit: Invalid value: '3': must be an integer",
        ),
        ({"claims": {"name": "x"}}, "claims: Invalid value: object: must be a list"),
        ({"pods": []}, "pods: Invalid value: list: unknown field"),
        ({"claims": [claim("x", 1)], "limit": 0}, "limit: Invalid value: 0:"),
        (
            {"pod": {**pod(), "kind": "Deployment", "apiVersion": "apps/v1"}},
            "pod.kind: Unsupported value: 'Deployment'",
        ),
        (
            {"pod": {**pod(), "spec": {"resourceClaims": "gpu"}}},
            "pod.spec.resourceClaims: Invalid value: 'gpu': must be a list",
        ),
        (
            {"claims": [template("t")]},
            "claims[0].kind: Invalid value: 'ResourceClaimTemplate': must be ResourceClaim",
        ),
        ({"nodes": ["node-a"]}, "pod: Required value"),
        ({"claims": [claim("x", 1, "node-a")]}, "claims[0].status: Forbidden"),
        (
            {"claims": [{**claim("x", 1), "metadata": {"name": "x", "namespace": "other"}}, claim("y", 1)]},
            "claims[1].metadata.namespace: Invalid value: 'team-a': must be 'other'",
        ),
        ({"claims": [claim("x", 1)], "nodes": ["node-a", "node-a"]}, "nodes: Duplicate value: 'node-a'"),
        ([1, 2], "body: Invalid value: must be a JSON object"),
    ],
)
async def test_malformed_requests_are_400_naming_the_field(serve: Any, body: Any, field: str) -> None:
    served = await serve()
    status, answer, _ = await served.post(body)
    assert status == 400, answer
    assert any(p.startswith(field) for p in answer["problems"]), answer


async def test_bodies_that_are_not_json_or_not_json_typed_are_refused(serve: Any) -> None:
    served = await serve()
    status, answer, _ = await served.post(None, raw=b'{"pod": ')
    assert status == 400 and answer["problems"][0].startswith("body: Invalid value: not JSON: ")
    status, answer, _ = await served.post(ONE_GPU_POD, headers={"Content-Type": "text/yaml"})
    assert status == 415 and "application/json" in answer["error"]


async def test_a_question_nested_deeper_than_its_objects_can_be_written_is_400(serve: Any) -> None:
    """The question's pod is validated from its JSON form, which pydantic writes only to about 255
    levels: a pod nested 300 levels deep in an unknown field was a 500 (issue 16's fuzzing). The
    dry run reads what pydantic's parser reads, 200 levels."""
    served = await serve()
    for depth, wanted in ((150, 200), (300, 400)):
        deep: Any = "leaf"
        for _ in range(depth):
            deep = {"n": deep}
        question = copy.deepcopy(ONE_GPU_POD)
        question["pod"]["spec"]["resourceClaims"][0]["n"] = deep
        status, answer, _ = await served.post(question)
        assert status == wanted, answer
    (problem,) = answer["problems"]
    assert problem == "body: Invalid value: nested deeper than 200 levels, the most draguard reads"


async def test_too_many_claims_or_nodes_are_refused_before_any_work(serve: Any) -> None:
    served = await serve(replace(DEMO, max_claims=2, max_nodes=2))
    status, answer, _ = await served.post(
        {"claims": [claim(f"c{i}", 1) for i in range(3)], "nodes": ["node-a", "node-b", "node-c"]}
    )
    assert status == 400
    assert answer["problems"] == [
        "claims: Too many: 3: must have at most 2 items",
        "nodes: Too many: 3: must have at most 2 items",
    ]


async def test_oversized_bodies_are_413_whether_announced_or_streamed(serve: Any) -> None:
    served = await serve(replace(DEMO, max_body_bytes=2048))
    big = {"claims": [claim("x", 1)], "padding": "x" * 4096}
    status, answer, _ = await served.post(big)
    assert status == 413 and "2048 bytes" in answer["error"]

    async def chunks() -> AsyncIterator[bytes]:  # chunked: no Content-Length to refuse up front
        for _ in range(8):
            yield b" " * 1024

    connector = aiohttp.TCPConnector(ssl=served.tls.client_context())
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(
            served.url + api.DRYRUN_PATH, data=chunks(), headers={"Content-Type": "application/json"}
        ) as response,
    ):
        assert response.status == 413


async def test_a_missing_template_or_node_is_422_with_the_message(serve: Any) -> None:
    served = await serve()
    status, answer, _ = await served.post({"pod": pod({"name": "gpu", "resourceClaimTemplateName": "nope"})})
    assert status == 422
    assert answer["error"] == (f"pod {NS}/trainer: claim 'gpu': resource claim template {NS}/nope not found")
    status, answer, _ = await served.post({**ONE_GPU_POD, "nodes": ["node-z"]})
    assert status == 422 and answer["problems"] == ["nodes: Not found: 'node-z'"]


async def test_objects_the_api_server_would_refuse_are_422(serve: Any) -> None:
    served = await serve()
    bad = claim("bad", 1)
    bad["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.nope =="}}
    ]
    status, answer, _ = await served.post({"claims": [bad]})
    assert status == 422
    assert answer["problems"][0].startswith(
        "claims[0]: spec.devices.requests[0].exactly.selectors[0].cel.expression"
    )


async def test_a_name_the_cluster_already_has_is_422(serve: Any) -> None:
    served = await serve()
    status, answer, _ = await served.post({"claims": [claim("busy-node-a", 1)]})
    assert status == 422 and "already exists in the cluster" in answer["error"]


async def test_a_pods_priority_comes_from_the_clusters_classes(serve: Any) -> None:
    """The pod as written, with priorityClassName: resolved from the state's PriorityClasses as the
    API server resolves it, so preemption is answered as the scheduler would answer it; a class the
    cluster does not have is refused in the API server's words."""
    kind = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
    classes = [{**kind, "metadata": {"name": n}, "value": v} for n, v in (("batch", 100), ("urgent", 1000))]
    batch = {**BUSY_CPU, "spec": {**BUSY_CPU["spec"], "nodeName": "node-a", "priorityClassName": "batch"}}
    served = await serve(snapshot=snapshot_of([node_object("node-a"), batch, *classes]))
    container = {"name": "main", "image": "trainer:1", "resources": {"requests": {"cpu": "4"}}}
    urgent = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "urgent", "namespace": NS},
        "spec": {"priorityClassName": "urgent", "containers": [container]},
    }
    status, answer, _ = await served.post({"pod": urgent})
    assert status == 200
    assert (answer["nominated"], answer["victims"]) == ("node-a", ["other/busy-cpu"])
    urgent["spec"]["priorityClassName"] = "urgnet"
    status, answer, _ = await served.post({"pod": urgent})
    assert status == 422
    assert answer["problems"] == [
        'pod: pods "urgent" is forbidden: no PriorityClass with name urgnet was found (the PriorityClasses '
        "are batch, system-cluster-critical, system-node-critical, urgent)"
    ]


# --- time bounds --------------------------------------------------------------------------------------


class SteppingClock:
    """Every reading is ``step`` seconds after the previous one: time passes as the code looks at it."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_past_the_total_deadline_the_answer_is_partial(serve: Any) -> None:
    # Four clock readings per node now (pace, node start, search), so 2.0 s each is past 10 s at the third.
    served = await serve(replace(DEMO, timeout=10.0, node_timeout=100.0), clock=SteppingClock(2.0))
    status, body, _ = await served.post(ONE_GPU_POD)
    assert status == 200, body
    assert body["complete"] is False
    assert 0 < body["checked"] < body["total"] == 3
    assert len(body["nodes"]) == body["checked"]


async def test_no_node_checked_within_the_deadline_is_503(serve: Any) -> None:
    served = await serve(replace(DEMO, timeout=1.0), clock=SteppingClock(1.0))
    status, body, headers = await served.post(ONE_GPU_POD)
    assert status == 503 and "no node could be checked" in body["error"]
    assert headers["Retry-After"] == "1"


async def test_a_node_over_its_search_budget_fails_like_an_aborted_filter(serve: Any) -> None:
    served = await serve(replace(DEMO, node_max_steps=1))
    status, body, _ = await served.post(ONE_GPU_POD)
    assert status == 200 and body["complete"] is True and body["fitting"] == 0
    assert all(n["error"].startswith("filter operation aborted") for n in body["nodes"])


async def test_not_synced_is_503(serve: Any) -> None:
    served = await serve(provider=lambda: None)
    status, body, headers = await served.post(ONE_GPU_POD)
    assert (status, body["error"], headers["Retry-After"]) == (
        503,
        "the cluster state is not synced yet",
        "1",
    )


async def test_the_event_loop_serves_while_a_dry_run_works_and_a_full_queue_is_503(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    real = api.answer_request

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "answer_request", slow)
    served = await serve(replace(DEMO, queue=0))
    first = asyncio.create_task(served.post(ONE_GPU_POD))
    await asyncio.to_thread(started.wait, 10)
    try:
        status, document = await asyncio.wait_for(served.get(api.OPENAPI_PATH), 5)
        assert status == 200 and document["openapi"] == "3.1.0"
        status, body, headers = await served.post(ONE_GPU_POD)
        assert status == 503 and body["error"].startswith("busy") and int(headers["Retry-After"]) >= 1
    finally:
        release.set()
    status, _, _ = await first
    assert status == 200


# --- authentication and rate limit ------------------------------------------------------------------------


def unreachable_apiserver() -> str:
    """The URL of a port nothing listens on: every review fails to connect."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{s.getsockname()[1]}"


async def test_without_demo_a_caller_without_credentials_is_401(serve: Any) -> None:
    served = await serve(DryRunSettings(), apiserver_url=unreachable_apiserver())
    status, body, headers = await served.post(ONE_GPU_POD)
    # 401, not 503: nothing was sent to the (unreachable) API server
    assert status == 401 and "bearer token" in body["error"]
    assert headers["WWW-Authenticate"].startswith("Bearer")


async def test_a_token_review_that_cannot_be_made_is_503(serve: Any) -> None:
    served = await serve(DryRunSettings(), apiserver_url=unreachable_apiserver())
    status, body, _ = await served.post(ONE_GPU_POD, token="good-token")
    assert status == 503 and body["error"].startswith("cannot authenticate the bearer token now")


async def test_client_certificates_of_the_configured_ca_are_accepted(serve: Any, tls: Tls) -> None:
    settings = DryRunSettings(client_ca_file=tls.file("client-ca.crt", tls.client_ca.cert_pem))
    served = await serve(settings)
    status, body, _ = await served.post(
        ONE_GPU_POD, cert=issue_client(tls.client_ca, "alice", ("dra-admins",), NOW, DAY)
    )
    assert status == 200, body
    status, body, _ = await served.post(ONE_GPU_POD)
    assert status == 401 and "client certificate" in body["error"]


async def test_a_certificate_the_handshake_accepts_but_the_dry_run_ca_did_not_issue_is_401(
    serve: Any, tls: Tls
) -> None:
    # The serving context trusts the client CA; the dry run is configured with another one.
    settings = DryRunSettings(client_ca_file=tls.file("other-ca.crt", generate_ca(NOW, DAY).cert_pem))
    served = await serve(settings)
    mallory = issue_client(tls.client_ca, "mallory", (), NOW, DAY)
    status, body, _ = await served.post(ONE_GPU_POD, cert=mallory)
    assert status == 401 and "is not issued by the dry-run CA" in body["error"]


async def test_each_caller_has_a_token_bucket_and_gets_429_with_retry_after(serve: Any, tls: Tls) -> None:
    settings = DryRunSettings(
        rate=0.1, burst=2, client_ca_file=tls.file("client-ca.crt", tls.client_ca.cert_pem)
    )
    served = await serve(settings)
    alice = issue_client(tls.client_ca, "alice", (), NOW, DAY)
    statuses = [(await served.post(ONE_GPU_POD, cert=alice))[0] for _ in range(2)]
    status, body, headers = await served.post(ONE_GPU_POD, cert=alice)
    assert statuses == [200, 200]
    assert status == 429 and "rate limit" in body["error"]
    assert 1 <= int(headers["Retry-After"]) <= 10
    bob = issue_client(tls.client_ca, "bob", (), NOW, DAY)
    assert (await served.post(ONE_GPU_POD, cert=bob))[0] == 200


# --- OpenAPI --------------------------------------------------------------------------------------


def schema_for(document: dict[str, Any], name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}", "components": document["components"]}


async def test_openapi_describes_real_answers_errors_and_requests(serve: Any) -> None:
    served = await serve()
    status, document = await served.get(api.OPENAPI_PATH)
    assert status == 200 and document["openapi"] == "3.1.0"
    jsonschema.Draft202012Validator.check_schema(document["components"]["schemas"]["DryRunResponse"])
    validator = jsonschema.Draft202012Validator
    _, body, _ = await served.post(ONE_GPU_POD)
    validator(schema_for(document, "DryRunResponse")).validate(body)
    _, refused, _ = await served.post(
        {
            "pod": pod({"name": "gpu", "resourceClaimTemplateName": "three"}),
            "claimTemplates": [template("three", 3)],
        }
    )
    validator(schema_for(document, "DryRunResponse")).validate(refused)
    published = json.loads((schemas.DIRECTORY / "DryRunResponse.json").read_text())
    for answer in (body, refused):  # the schema published in the repository says the same
        validator(published).validate(answer)
    _, error, _ = await served.post({"claims": "x"})
    validator(schema_for(document, "Error")).validate(error)
    validator(schema_for(document, "DryRunRequest")).validate(ONE_GPU_POD)
    with pytest.raises(jsonschema.ValidationError):
        validator(schema_for(document, "DryRunRequest")).validate({"pods": []})


def test_the_request_schema_names_the_fields_the_parser_takes() -> None:
    request = api.openapi_document(DEMO)["components"]["schemas"]["DryRunRequest"]
    assert set(request["properties"]) == {f.alias for f in api.DryRunRequest.model_fields.values()}


# --- headroom --------------------------------------------------------------------------------------


def without_quota() -> Snapshot:
    return snapshot_of([o for o in cluster_objects() if o["kind"] != "ResourceQuota"])


async def test_headroom_places_copies_until_the_gpus_run_out(serve: Any) -> None:
    served = await serve(snapshot=without_quota())
    status, body, _ = await served.post({**ONE_GPU_POD, "headroom": True})
    assert status == 200
    # A copy takes a GPU and a CPU: node-b has 2 CPUs left of 8 (BUSY_CPU).
    free = {node: min(4 - taken, 2 if node == "node-b" else 8) for node, taken in TAKEN.items()}
    assert (body["apiVersion"], body["kind"], body["pod"]) == (
        "draguard.io/v1alpha1",
        "HeadroomResponse",
        "team-a/trainer",
    )
    assert body["copies"] == sum(free.values())
    assert {n["node"]: n["copies"] for n in body["nodes"]} == {n: c for n, c in free.items() if c}
    assert body["limit"]["by"] == "Scheduler" and body["limit"]["reason"] == "Unschedulable"
    assert body["limit"]["message"].startswith(
        "0/3 nodes are available: 1 Insufficient cpu, 2 cannot allocate all claims."
    )
    assert body["limit"]["detail"] == ["devices of class gpu: 2 free of 12"]
    assert body["elapsedMs"] >= 0
    _, document = await served.get(api.OPENAPI_PATH)
    jsonschema.Draft202012Validator(schema_for(document, "HeadroomResponse")).validate(body)
    status, body, _ = await served.post({**ONE_GPU_POD, "headroom": True, "max": 2})
    assert (status, body["copies"], body["limit"]["by"], body["max"]) == (200, 2, "Max", 2)


async def test_headroom_names_the_quota_that_refuses_the_template_claim(serve: Any) -> None:
    served = await serve()
    status, body, _ = await served.post({**ONE_GPU_POD, "headroom": True})
    assert (status, body["copies"], body["limit"]["by"]) == (200, 0, "Quota")
    assert body["limit"]["message"] == (
        'resourceclaims "trainer-copy-1-gpu" is forbidden: exceeded quota: claims, requested: '
        "count/resourceclaims.resource.k8s.io=1, used: count/resourceclaims.resource.k8s.io=2, "
        "limited: count/resourceclaims.resource.k8s.io=2"
    )
    assert body["limit"]["quota"] == {
        "name": "claims",
        "hard": {"count/resourceclaims.resource.k8s.io": "2"},
        "used": {"count/resourceclaims.resource.k8s.io": "2"},
    }


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"headroom": True, "nodes": ["node-a"]}, "nodes: Forbidden: a headroom places copies on any node"),
        ({"max": 3}, 'max: Forbidden: only with "headroom": true'),
        ({"headroom": True, "max": 0}, "max: Invalid value: 0: Input should be greater than or equal to 1"),
    ],
)
async def test_headroom_requests_that_cannot_work_are_400(
    serve: Any, extra: dict[str, Any], problem: str
) -> None:
    served = await serve()
    status, body, _ = await served.post({**ONE_GPU_POD, **extra})
    assert status == 400
    assert any(p.startswith(problem) for p in body["problems"]), body


async def test_headroom_past_the_deadline_says_how_many_fit_at_least(serve: Any) -> None:
    # Time passes as the placing reads the clock: the deadline comes before the GPUs run out.
    settings = replace(DEMO, timeout=20.0, node_timeout=100.0)
    served = await serve(settings, snapshot=without_quota(), clock=SteppingClock(1.0))
    status, body, _ = await served.post({**ONE_GPU_POD, "headroom": True})
    assert status == 200, body
    assert body["limit"]["by"] == "Deadline", body
    assert 0 < body["copies"] < 5 and len(body["order"]) == body["copies"]
    assert body["limit"]["message"] == (
        f"the deadline passed after {body['copies']} copies: at least that many fit"
    )
