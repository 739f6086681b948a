"""Workloads judged as kube-apiserver 1.36.2 judges them: their own rules, then their pod template
as a pod under its path (each expected line below is what the real server answered)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.reading import read
from policies.validation.documents import judge

CONTAINERS = [{"name": "c", "image": "i"}]


def workload(kind: str, spec: dict[str, Any], api_version: str = "apps/v1") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": spec,
    }


def verdict(raw: dict[str, Any]) -> list[str]:
    reading = read(raw)
    assert reading.errors == []
    return judge(reading)


def template(spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": {"containers": CONTAINERS, **(spec or {})}}
    if labels is not None:
        out["metadata"] = {"labels": labels}
    return out


MATCHED = {"selector": {"matchLabels": {"app": "x"}}, "template": template(labels={"app": "x"})}
MISMATCH = (
    'spec.template.metadata.labels: Invalid value: {"app":"x"}: `selector` does not match template `labels`'
)


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"])
def test_a_valid_controller(kind: str) -> None:
    assert verdict(workload(kind, MATCHED)) == []


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        (
            "Deployment",
            {"template": template()},
            [
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: null: `selector` does "
                "not match template `labels`",
            ],
        ),
        (
            "DaemonSet",
            {"template": template()},
            [
                "spec.template.metadata.labels: Invalid value: null: "
                "`selector` does not match template `labels`"
            ],
        ),
        (
            "Deployment",
            {"selector": {}, "template": template(labels={"app": "x"})},
            ["spec.selector: Invalid value: {}: empty selector is invalid for deployment"],
        ),
        (
            "ReplicaSet",
            {"replicas": -1, "selector": {}, "template": template(labels={"app": "x"})},
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.selector: Invalid value: {}: empty selector is invalid for deployment",
            ],
        ),
        (
            "StatefulSet",
            {
                "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["y"]}]},
                "template": template({"restartPolicy": "OnFailure"}, labels={"app": "x"}),
            },
            [
                MISMATCH,
                'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": '
                'supported values: "Always"',
            ],
        ),
    ],
)
def test_controller_rules(kind: str, spec: dict[str, Any], expected: list[str]) -> None:
    assert verdict(workload(kind, spec)) == expected


def test_replication_controller_selector_defaults_from_the_template() -> None:
    rc = workload("ReplicationController", {"template": template(labels={"a": "b"})}, "v1")
    assert verdict(rc) == []
    rc["spec"]["template"] = template()
    assert verdict(rc) == ["spec.selector: Required value"]
    rc["spec"] = {"selector": {"a": "c"}, "template": template(labels={"a": "b"})}
    assert verdict(rc) == [
        'spec.template.metadata.labels: Invalid value: {"a":"b"}: `selector` does not match template `labels`'
    ]


def test_jobs_need_a_restart_policy_that_ends() -> None:
    job = workload("Job", {"template": template()}, "batch/v1")
    required = 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'
    assert verdict(job) == [required]
    job["spec"]["template"] = template({"restartPolicy": "Never"})
    assert verdict(job) == []
    cron = workload("CronJob", {"jobTemplate": {"spec": {"template": template()}}}, "batch/v1")
    assert verdict(cron) == [
        "spec.schedule: Required value",
        required.replace("spec.template", "spec.jobTemplate.spec.template"),
    ]


def test_the_template_is_checked_as_a_pod_under_its_path() -> None:
    spec = {
        "containers": [
            {"name": "c"},
            {"name": "c", "image": "i", "resources": {"claims": [{"name": "gpus"}]}},
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    }
    job = workload("Job", {"template": {"spec": {**spec, "restartPolicy": "Never"}}}, "batch/v1")
    assert verdict(job) == [
        "spec.template.spec.containers[0].image: Required value",
        'spec.template.spec.containers[1].name: Duplicate value: "c"',
        'spec.template.spec.containers[1].resources.claims[0]: Not found: "gpus": must be one of the '
        "names in pod.spec.resourceClaims: gpu",
    ]


def test_a_pod_without_containers_or_with_an_unknown_restart_policy() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    assert verdict(pod) == ["spec.containers: Required value"]
    pod["spec"] = {"containers": CONTAINERS, "restartPolicy": "Sometimes"}
    assert verdict(pod) == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
    ]
