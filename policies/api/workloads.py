"""Workload kinds whose pod template holds the DRA parts, and the pod a template stands for.

A Deployment, Job or StatefulSet references its ResourceClaims and ResourceClaimTemplates in
``spec.template.spec``, exactly as a Pod does in ``spec``; draguard checks the template as a pod
and ``allocate`` allocates one pod of it. A template's fields are reported with their path in the
workload (``spec.template.spec.resourceClaims[0].name``), as the API server reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (apiVersion, kind) -> where the pod template is in the object.
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("v1", "ReplicationController"): ("spec", "template"),
    ("v1", "PodTemplate"): ("template",),
    ("apps/v1", "Deployment"): ("spec", "template"),
    ("apps/v1", "ReplicaSet"): ("spec", "template"),
    ("apps/v1", "StatefulSet"): ("spec", "template"),
    ("apps/v1", "DaemonSet"): ("spec", "template"),
    ("batch/v1", "Job"): ("spec", "template"),
    ("batch/v1", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}


def template_path(api_version: str, kind: str) -> tuple[str, ...] | None:
    return TEMPLATES.get((api_version, kind))


def template_of(raw: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    """The template at ``path`` in a workload's JSON (empty where it is missing)."""
    node: Any = raw
    for name in path:
        node = node.get(name) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def pod_of(raw: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The Pod JSON a workload's template stands for: the template's metadata and spec, in the
    workload's namespace, named after the workload (a name only a person reads: the controller
    adds its own suffix)."""
    template = template_of(raw, path)
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    found = template.get("metadata")
    pod_meta = dict(found) if isinstance(found, Mapping) else {}
    pod_meta["name"] = meta.get("name") or meta.get("generateName") or ""
    if meta.get("namespace"):
        pod_meta["namespace"] = meta["namespace"]
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta}
    if template.get("spec") is not None:
        pod["spec"] = template["spec"]
    return pod


def under_template(path: tuple[str, ...], field: str) -> str:
    """A pod's field path (``spec.containers[0]``, ``metadata.labels``) as the path of the same
    field in the workload's template (``spec.template.spec.containers[0]``)."""
    return ".".join(path) + "." + field
