"""What the end-to-end tests create as users and controllers would: pods with claims, claims,
evictions; and what they wait for: a pod bound by the scheduler, a claim allocated and reserved.

Everything goes through :func:`controlplane.call`, so a test sees refusals, warnings and successes
the way a client does. Pods never run (there is no kubelet): "scheduled" means bound to a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controlplane import Answer, call, wait_for
from kubernetes import client

RESOURCE = "/apis/resource.k8s.io/v1"
# The PodScheduled=False reasons (upstream pkg/apis/core/types.go PodReasonUnschedulable,
# PodReasonSchedulerError, PodReasonSchedulingGated).
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
SCHEDULING_GATED = "SchedulingGated"


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def claims(namespace: str) -> str:
    return f"{RESOURCE}/namespaces/{namespace}/resourceclaims"


def templates(namespace: str) -> str:
    return f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates"


def slices() -> str:
    return f"{RESOURCE}/resourceslices"


def resource_slice(driver: str, node: str, devices: int = 1) -> dict[str, Any]:
    """The ResourceSlice a driver's kubelet plugin publishes for its node: one pool named after the
    node, ``devices`` devices ``dev-0``, ``dev-1``, ..."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)],
        },
    }


def device_class(driver: str) -> dict[str, Any]:
    """The DeviceClass a driver's chart installs: every device of the driver, named after it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


def claim_spec(device_class: str, count: int = 1) -> dict[str, Any]:
    """One request named ``dev`` for ``count`` devices of ``device_class``."""
    request = {"name": "dev", "exactly": {"deviceClassName": device_class, "count": count}}
    return {"devices": {"requests": [request]}}


def claim(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": claim_spec(device_class),
    }


def template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(device_class)},
    }


def pod(
    name: str,
    *,
    claims: Sequence[str] = (),
    templates: Sequence[str] = (),
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    gated: bool = False,
    labels: Mapping[str, str] | None = None,
    containers: Sequence[str] = ("app",),
) -> dict[str, Any]:
    """A pod whose every container uses every claim: ``claims`` by name (``resourceClaimName``),
    ``templates`` through a claim made for the pod (``resourceClaimTemplateName``). ``gated`` holds
    it back from the scheduler (a scheduling gate) until :func:`release` removes the gate."""
    refs = [{"name": c, "resourceClaimName": c} for c in claims]
    refs += [{"name": t, "resourceClaimTemplateName": t} for t in templates]
    uses = [{"name": r["name"]} for r in refs]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": c,
                "image": "registry.k8s.io/pause:3.10",
                **({"resources": {"claims": uses}} if uses else {}),
            }
            for c in containers
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if refs:
        spec["resourceClaims"] = refs
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if gated:
        spec["schedulingGates"] = [{"name": "e2e.draguard.io/hold"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def create(api: client.ApiClient, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create an object the test needs to exist; anything but 201 fails the test with the answer."""
    answer = call(api, "POST", path, body)
    assert answer.status == 201, f"POST {path}: {answer.status} {answer.body}"
    return answer.body


def get(api: client.ApiClient, path: str) -> dict[str, Any]:
    answer = call(api, "GET", path)
    assert answer.status == 200, f"GET {path}: {answer.status} {answer.body}"
    return answer.body


def release(api: client.ApiClient, namespace: str, name: str) -> None:
    """Remove the pod's scheduling gate: the scheduler takes it from here."""
    answer = call(api, "PATCH", f"{pods(namespace)}/{name}", {"spec": {"schedulingGates": None}})
    assert answer.status == 200, answer.body


def bound_node(api: client.ApiClient, namespace: str, name: str, timeout: float = 60) -> str:
    """Wait until the scheduler has bound the pod; the node's name."""
    node: str = wait_for(
        f"pod {namespace}/{name} to be bound to a node",
        lambda: get(api, f"{pods(namespace)}/{name}")["spec"].get("nodeName"),
        timeout=timeout,
    )
    return node


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of that type, if the object has one."""
    found = [c for c in obj.get("status", {}).get("conditions") or () if c["type"] == kind]
    return found[0] if found else None


def not_scheduled(api: client.ApiClient, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
    """Wait until the scheduler has given up on the pod for now; its ``PodScheduled`` condition."""

    def refused() -> dict[str, Any] | None:
        found = condition(get(api, f"{pods(namespace)}/{name}"), "PodScheduled")
        gave_up = found is not None and found["status"] == "False" and found["reason"] != SCHEDULING_GATED
        return found if gave_up else None

    found: dict[str, Any] = wait_for(
        f"the scheduler to give up on pod {namespace}/{name}", refused, timeout=timeout
    )
    return found


def reserved_for(api: client.ApiClient, namespace: str, claim_name: str) -> list[str]:
    """The names of the consumers the claim is reserved for (empty while it is not)."""
    status = get(api, f"{claims(namespace)}/{claim_name}").get("status", {})
    return [r["name"] for r in status.get("reservedFor") or ()]


def allocation(api: client.ApiClient, namespace: str, claim_name: str) -> list[str]:
    """The claim's allocated devices as ``driver/pool/device``."""
    status = get(api, f"{claims(namespace)}/{claim_name}").get("status", {})
    results = status.get("allocation", {}).get("devices", {}).get("results") or ()
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def pod_claim(api: client.ApiClient, namespace: str, pod_name: str, ref: str, timeout: float = 60) -> str:
    """The name of the claim the resourceclaim controller made for the pod's template reference."""

    def made() -> str | None:
        statuses = (
            get(api, f"{pods(namespace)}/{pod_name}").get("status", {}).get("resourceClaimStatuses") or ()
        )
        return next((s.get("resourceClaimName") for s in statuses if s["name"] == ref), None)

    name: str = wait_for(
        f"the claim of pod {namespace}/{pod_name} from template {ref}", made, timeout=timeout
    )
    return name


def dry_run_until(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Mapping[str, Any] | None,
    status: int,
    containing: str = "",
    timeout: float = 15,
) -> Answer:
    """Repeat the request with ``dryRun=All`` (admission, draguard included, decides; nothing is
    stored) until it is answered with ``status`` and a message ``containing`` that; that answer.

    draguard's snapshot follows the API server a moment behind, so right after a change a request
    may still be decided on the state before it; a test waits here until draguard has seen what the
    real request's answer depends on, then sends the real request."""
    answers: list[Answer] = []

    def answered() -> Answer | None:
        answers.append(call(api, method, path, body, query={"dryRun": "All"}))
        last = answers[-1]
        return last if last.status == status and containing in last.message else None

    what = f"{method} {path} (dry run) to be answered {status} {containing!r}"
    try:
        found: Answer = wait_for(what, answered, timeout)
    except AssertionError as err:
        raise AssertionError(f"{err}; last answer: {answers[-1].status} {answers[-1].body}") from None
    return found


def eviction(namespace: str, name: str) -> dict[str, Any]:
    """A policy/v1 Eviction of the pod, as ``kubectl drain`` posts it."""
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
