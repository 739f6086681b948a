"""The example cluster behind ``draguard serve --demo``, shipped inside the package.

The YAML files here are copies of ``examples/gpu-cluster`` and ``examples/workloads`` (a test keeps
them identical), so that ``pip install .`` without the source tree still has them. The demo serves
the cluster and offers the workload's Pod as an AdmissionReview to send with ``curl``: the Pod is
what is being created, so it is the review's object and not part of the cluster state.
"""

from __future__ import annotations

import uuid
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
    metadata = pod.get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": metadata.get("name", ""),
            "namespace": metadata.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["team-a", "system:authenticated"]},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }
