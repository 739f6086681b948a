"""The example cluster behind ``draguard serve --demo``, shipped inside the package.

The YAML files here are copies of ``examples/gpu-cluster`` and ``examples/workloads`` (a test keeps
them identical), so that ``pip install .`` without the source tree still has them. The demo serves
the cluster and offers requests to send with ``curl`` (:func:`examples`): the workload's Pod, which
is allowed (the Pod is what is being created, so it is a review's object and not part of the
cluster state), a claim that is denied, one that is allowed with a warning, and the Pod's dry run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from importlib.resources import as_file, files
from typing import Any

from webhook.manifests import Document, read_documents

FILES = ("classes.yaml", "nodes.yaml", "slices.yaml", "claims.yaml", "pod-with-claims.yaml")


def documents() -> list[Document]:
    """Every document of the example cluster and workload, in file order."""
    with as_file(files(__name__)) as directory:
        return read_documents([str(directory / name) for name in FILES])


def split(docs: list[Document]) -> tuple[list[Document], dict[str, Any]]:
    """``(cluster state, the Pod to admit)``."""
    pods = [d for d in docs if isinstance(d.raw, dict) and d.raw.get("kind") == "Pod"]
    return [d for d in docs if d not in pods], pods[0].raw


def pod_review(pod: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview the API server would send for ``kubectl create`` of ``pod`` by user alice."""
    return review(pod, "pods")


def review(obj: dict[str, Any], resource: str) -> dict[str, Any]:
    """The AdmissionReview the API server would send for ``kubectl create`` of ``obj`` (one of
    ``resource``, e.g. ``resourceclaims``) by user alice."""
    metadata = obj.get("metadata") or {}
    group, _, version = str(obj.get("apiVersion", "v1")).rpartition("/")
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    resource_ = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource_,
            "requestKind": kind,
            "requestResource": resource_,
            "name": metadata.get("name", ""),
            "namespace": metadata.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["team-a", "system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


@dataclass(frozen=True)
class Example:
    """A request the demo offers to send with curl, and what draguard answers to it."""

    name: str  # the file the body is written to, without .json
    answer: str  # what the answer is, as the banner says it
    path: str  # /validate or /v1/dryrun
    body: dict[str, Any]


def _claim(name: str, expression: str) -> dict[str, Any]:
    """A claim in team-a for one GPU of the example cluster, picked by ``expression``."""
    request = {"deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression": expression}}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }


def examples(pod: dict[str, Any]) -> list[Example]:
    """One request per kind of answer: allowed, denied, warned, and a dry run of ``pod``."""
    model = 'device.attributes["gpu.example.com"].model'
    return [
        Example("allowed", "allowed: the example pod", "/validate", pod_review(pod)),
        Example(
            "denied",
            "denied: a claim whose selector is not valid CEL ('=' where '==' belongs)",
            "/validate",
            review(_claim("typo", f'{model} = "a100"'), "resourceclaims"),
        ),
        Example(
            "warned",
            "allowed with a warning: a claim for a GPU model no node has",
            "/validate",
            review(_claim("h200", f'{model} == "h200"'), "resourceclaims"),
        ),
        Example(
            "dryrun", "dry run: where the example pod would fit, node by node", "/v1/dryrun", {"pod": pod}
        ),
    ]
