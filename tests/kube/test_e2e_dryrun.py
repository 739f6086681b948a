"""``POST /v1/dryrun`` through the real API server: who the caller is (a TokenReview of a real
ServiceAccount token, or a client certificate) and whether RBAC lets it post to ``/v1/dryrun`` (a
SubjectAccessReview, answered from the chart's ClusterRole ``draguard-dryrun`` once it is bound).
draguard asks both with the chart's own RBAC, so a permission the chart forgot is a 503 here."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed, remove
from kubernetes import client
from workloads import claim, device_class, resource_slice

NS = "e2e-dryrun"
DRIVER = "dryrun.example.com"
NODE = "dryrun-node"
ROLE = "draguard-dryrun"


def cluster_objects() -> list[dict[str, Any]]:
    return [device_class(DRIVER), resource_slice(DRIVER, NODE, devices=2)]


QUESTION = {"claims": [{**claim("one-gpu", DRIVER), "metadata": {"name": "one-gpu", "namespace": NS}}]}


@dataclass
class Endpoint:
    """draguard's HTTPS port as a caller outside the API server reaches it."""

    draguard: Draguard
    plane: ControlPlane
    ca_file: Path

    def post(
        self,
        token: str | None = None,
        cert: tuple[Path, Path] | None = None,
        question: dict[str, Any] = QUESTION,
    ) -> tuple[int, dict[str, Any]]:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        connection = http.client.HTTPSConnection("127.0.0.1", self.draguard.balancer.port, context=context)
        try:
            connection.request("POST", "/v1/dryrun", json.dumps(question), headers)
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read())
        finally:
            connection.close()


@pytest.fixture(scope="module")
def endpoint(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    admin = control_plane.client()
    control_plane.add_node(NODE)
    objects = cluster_objects()
    apply(admin, objects)
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": NS}})
    for account in ("planner", "intruder"):
        core.create_namespaced_service_account(NS, {"metadata": {"name": account}})
    bindings = [binding("planner", {"kind": "ServiceAccount", "name": "planner", "namespace": NS})]
    group = {"kind": "Group", "name": "planners", "apiGroup": "rbac.authorization.k8s.io"}
    bindings.append(binding("planners", group))
    # Client certificates from the cluster's CA are the dry-run's second way in (--dryrun-client-ca).
    args = [f"--dryrun-client-ca={control_plane.ca_file}"]
    try:
        with installed(control_plane, {}, args=args) as deployment:
            apply(admin, bindings)
            ca_file = tmp_path_factory.mktemp("dryrun") / "draguard-ca.crt"
            ca_file.write_bytes(deployment.ca_bundle())
            yield Endpoint(deployment, control_plane, ca_file)
    finally:
        remove(admin, [*objects, *bindings, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}])
        core.delete_namespace(NS)


def binding(name: str, subject: dict[str, str]) -> dict[str, Any]:
    """Binds the chart's dry-run ClusterRole, as the chart README tells an admin to."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"dryrun-{name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [subject],
    }


def token(plane: ControlPlane, account: str) -> str:
    """A bound ServiceAccount token, as a pod would have mounted (TokenRequest)."""
    core = client.CoreV1Api(plane.client())
    answer = core.create_namespaced_service_account_token(account, NS, {"spec": {"expirationSeconds": 3600}})
    value: str = answer.status.token
    return value


def test_a_bound_service_account_token_is_answered(endpoint: Endpoint) -> None:
    status, body = wait_for(
        "the dry run to see the cluster's devices",
        lambda: (
            (answer := endpoint.post(token=token(endpoint.plane, "planner")))[0] == 200
            and answer[1]["fitting"] > 0
            and answer
        ),
    )
    assert status == 200
    fitting = [n["node"] for n in body["nodes"] if "rank" in n]  # ranked: the nodes that fit
    assert NODE in fitting, body


def test_a_token_without_the_role_is_refused_with_the_api_servers_own_words(endpoint: Endpoint) -> None:
    intruder = token(endpoint.plane, "intruder")
    status, body = endpoint.post(token=intruder)
    who = f"system:serviceaccount:{NS}:intruder"
    assert status == 403, body
    assert body["error"].startswith(f'User "{who}" cannot post path "/v1/dryrun"'), body
    # The API server refuses the same caller for a non-resource URL of its own in the same words.
    own = call(token_client(endpoint.plane, intruder), "POST", "/v1/dryrun", {})
    assert own.status == 403
    assert f'User "{who}" cannot post path "/v1/dryrun"' in own.message, own.message


def test_a_token_the_api_server_does_not_accept_is_401(endpoint: Endpoint) -> None:
    status, body = endpoint.post(token="not-a-token")
    assert status == 401 and body["error"].startswith("bearer token refused"), body


def test_client_certificates_are_authorized_by_their_groups(endpoint: Endpoint) -> None:
    plane = endpoint.plane
    status, body = endpoint.post(cert=plane.client_certificate("alice", ["planners"]))
    assert status == 200, body
    status, body = endpoint.post(cert=plane.client_certificate("mallory", ["interns"]))
    assert status == 403 and body["error"].startswith('User "mallory" cannot post path "/v1/dryrun"'), body


def test_a_pods_class_comes_from_the_cluster_and_a_missing_one_is_refused_in_its_words(
    endpoint: Endpoint,
) -> None:
    """The live state watches PriorityClasses (the chart's role lets it): a pod written with a class
    the cluster has is answered, one naming a class it lacks is refused as the API server refuses it."""
    admin = endpoint.plane.client()
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    batch = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"{NS}-batch"},
    }
    assert call(admin, "POST", classes, {**batch, "value": 100}).status == 201
    try:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "etl", "namespace": NS},
            "spec": {
                "priorityClassName": f"{NS}-batch",
                "serviceAccountName": "planner",  # the namespace's only accounts are the test's
                "containers": [{"name": "main", "image": "etl:1"}],
            },
        }
        cert = endpoint.plane.client_certificate("alice", ["planners"])
        # The state sees the class a moment after it is created.
        status, body = wait_for(
            "the class in draguard's state",
            lambda: (a := endpoint.post(cert=cert, question={"pod": pod}))[0] == 200 and a,
        )
        assert body["fits"], body
        pod["spec"]["priorityClassName"] = f"{NS}-nightly"
        refused = call(admin, "POST", f"/api/v1/namespaces/{NS}/pods", pod, {"dryRun": "All"})
        assert refused.status == 403
        status, body = endpoint.post(cert=cert, question={"pod": pod})
        assert status == 422, body
        assert body["problems"][0].startswith(f"pod: {refused.message} ("), (body, refused.message)
    finally:
        call(admin, "DELETE", f"{classes}/{NS}-batch")


def token_client(plane: ControlPlane, bearer: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = plane.url
    configuration.ssl_ca_cert = str(plane.ca_file)
    configuration.api_key = {"BearerToken": f"Bearer {bearer}"}
    return client.ApiClient(configuration)
