"""Workloads (Deployment, Job, ...): their pod template checked as a pod, and the few workload
rules that refuse a template outright.

The template is validated as upstream's ``ValidatePodTemplateSpec`` does (labels, annotations,
the pod spec: containers and the DRA parts) and reported under its path in the workload. The
workload's own rules that a published manifest can trip over are checked too, worded as the API
server words them (``pkg/apis/apps/validation``, ``pkg/apis/batch/validation``,
``ValidateReplicationControllerSpec``): the selector (required, not empty, matching the template's
labels), the restart policy each kind allows, non-negative replicas, a CronJob's schedule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from policies.api.core import Pod
from policies.validation.core import validate_pod_claims, validate_pod_containers
from policies.validation.fielderrors import (
    ErrorList,
    FieldError,
    Path,
    invalid,
    not_supported,
    required,
)
from policies.validation.meta import validate_annotations, validate_labels

# Kinds whose pods run forever: the template must restart them (ValidatePodTemplateSpecForReplicaSet).
_CONTROLLERS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController")
_JOBS = ("Job", "CronJob")
# The wording of the empty-selector error (ReplicaSet says "deployment" upstream too).
_EMPTY_SELECTOR_NOUN = {
    "Deployment": "deployment",
    "ReplicaSet": "deployment",
    "StatefulSet": "statefulset",
    "DaemonSet": "daemonset",
}
_MISMATCH = "`selector` does not match template `labels`"


def validate_pod_template(pod: Pod) -> ErrorList:
    """A template as a pod: paths ``metadata.labels``, ``spec.containers[0]``, ... (the caller puts
    them under the template's path). ``pod`` has no name: a template's pods are named later."""
    meta = Path("metadata")
    errs = validate_labels(pod.metadata.labels, meta.child("labels"))
    errs += validate_annotations(pod.metadata.annotations, meta.child("annotations"))
    return errs + validate_pod_containers(pod) + validate_pod_claims(pod)


def validate_workload(kind: str, raw: Mapping[str, Any], template: tuple[str, ...], pod: Pod) -> ErrorList:
    """Everything said about a workload: its own rules, then its template's, under ``template``."""
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    labels = pod.metadata.labels
    at = Path(*template)
    errs: ErrorList = []
    if kind == "CronJob" and not spec.get("schedule"):
        errs.append(required(Path("spec", "schedule")))
    if kind in _CONTROLLERS:
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and replicas < 0:
            errs.append(invalid(Path("spec", "replicas"), replicas, "must be greater than or equal to 0"))
        errs += _selector(kind, spec.get("selector"), labels, at)
    unnamed = pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"name": None})})
    errs += [under(template, e) for e in validate_pod_template(unnamed)]
    policy = pod.spec.restart_policy or "Always"  # the pod default (SetDefaults_PodSpec)
    if kind in _CONTROLLERS and policy != "Always":
        errs.append(not_supported(at.child("spec", "restartPolicy"), policy, ["Always"]))
    if kind in _JOBS and pod.spec.restart_policy not in ("OnFailure", "Never"):
        errs.append(required(at.child("spec", "restartPolicy"), 'valid values: "OnFailure", "Never"'))
    return errs


def under(template: tuple[str, ...], err: FieldError) -> FieldError:
    """A pod's error (``spec.containers[0].name``) at its place in a workload's template."""
    return dataclasses.replace(err, field=".".join(template) + "." + err.field)


def _selector(kind: str, selector: Any, labels: Mapping[str, str] | None, at: Path) -> ErrorList:
    path = Path("spec", "selector")
    mismatch = invalid(at.child("metadata", "labels"), labels, _MISMATCH)
    if kind == "ReplicationController":
        # A map; when absent it is defaulted to the template's labels (SetDefaults_ReplicationController).
        if not selector and not labels:
            return [required(path)]
        if selector and not all((labels or {}).get(k) == v for k, v in selector.items()):
            return [mismatch]
        return []
    errs: ErrorList = []
    if selector is None:
        # A nil selector matches nothing: DaemonSet says only that, the others also that it is required.
        return ([] if kind == "DaemonSet" else [required(path)]) + [mismatch]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [invalid(path, selector, f"empty selector is invalid for {_EMPTY_SELECTOR_NOUN[kind]}")]
    if not _matches(selector, labels or {}):
        errs.append(mismatch)
    return errs


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
