"""Pod and workload validation beyond the DRA parts, line for line as kube-apiserver 1.36.2 says it
(each expected line was taken from the real server's answer to the same document; the agreement
test, tests/kube/test_apiserver_agreement.py, checks many more against the server itself)."""

from __future__ import annotations

import copy
import zoneinfo
from typing import Any

import pytest

from policies.reading import read
from policies.validation.cron import schedule_problem, time_zone_problem
from policies.validation.documents import judge

CONTAINER: dict[str, Any] = {"name": "ctr", "image": "ubuntu:24.04"}


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [copy.deepcopy(CONTAINER)], **spec},
    }


def with_container(**fields: Any) -> dict[str, Any]:
    doc = pod()
    doc["spec"]["containers"][0].update(fields)
    return doc


def errors(doc: dict[str, Any]) -> list[str]:
    reading = read(doc)
    return reading.errors or judge(reading)


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        (
            with_container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
            'spec.containers[0].resources.requests: Invalid value: "2": must be '
            'less than or equal to cpu limit of 1',
        ),
        (
            with_container(resources={"limits": {"nvidia.com/gpu": "500m"}}),
            'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer',
        ),
        (
            with_container(resources={"requests": {"nvidia.com/gpu": "1"}}),
            "spec.containers[0].resources.limits: Required value: Limit must be "
            "set for non overcommitable resources",
        ),
        (
            with_container(imagePullPolicy="IfNotExists"),
            'spec.containers[0].imagePullPolicy: Unsupported value: "IfNotExists": '
            'supported values: "Always", "IfNotPresent", "Never"',
        ),
        (
            with_container(
                ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}]
            ),
            'spec.containers[0].ports[1].name: Duplicate value: "http"',
        ),
        (
            with_container(ports=[{"containerPort": 70000}]),
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must "
            "be between 1 and 65535, inclusive",
        ),
        (
            with_container(livenessProbe={"exec": {"command": ["true"]}, "successThreshold": 2}),
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ),
        (
            with_container(livenessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}),
            "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
        ),
        (
            with_container(
                env=[{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
            ),
            'spec.containers[0].env[0].valueFrom: Invalid value: "": may not be '
            'specified when `value` is not empty',
        ),
        (
            with_container(env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
            'spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: "spec.containers": '
            "error converting fieldPath: field label not supported: spec.containers",
        ),
        (
            with_container(volumeMounts=[{"name": "data", "mountPath": "/data"}]),
            'spec.containers[0].volumeMounts[0].name: Not found: "data"',
        ),
        (
            with_container(volumeMounts=[{"name": "a", "mountPath": "/d", "subPath": "../etc"}]),
            # The server names the list, not the item, here.
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"../etc\": must not contain '..'",
        ),
        (
            pod(volumes=[{"name": "a", "hostPath": {"path": "/dev", "type": "Dir"}}]),
            'spec.volumes[0].hostPath.type: Unsupported value: "Dir": supported values: "", "BlockDevice", '
            '"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"',
        ),
        (
            pod(volumes=[{"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
            "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
        ),
        (
            pod(
                tolerations=[
                    {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}
                ]
            ),
            "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            "`tolerationSeconds` is set",
        ),
        (
            pod(
                topologySpreadConstraints=[
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
                * 2
            ),
            'spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: '
            'Duplicate value: "{zone, DoNotSchedule}"',
        ),
        (
            pod(dnsPolicy="None"),
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            pod(
                hostNetwork=True,
                containers=[{**CONTAINER, "ports": [{"containerPort": 80, "hostPort": 8080}]}],
            ),
            "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match "
            "`containerPort` when `hostNetwork` is true",
        ),
        (
            pod(overhead={"cpu": "100m"}),
            "spec.overhead: Forbidden: pod rejected: Pod Overhead set without "
            "corresponding RuntimeClass defined Overhead",
        ),
    ],
)
def test_a_pod_is_refused_as_the_server_refuses_it(doc: dict[str, Any], line: str) -> None:
    assert line in errors(doc)


def test_the_defaults_are_applied_before_validation() -> None:
    """No source is an emptyDir; probe thresholds, a port's protocol and the termination message
    policy ("File") take their defaults; a sidecar may have probes."""
    doc = pod(
        volumes=[{"name": "a"}],
        initContainers=[
            {**CONTAINER, "name": "side", "restartPolicy": "Always", "startupProbe": {"grpc": {"port": 9}}}
        ],
    )
    doc["spec"]["containers"][0].update(
        terminationMessagePolicy="File",
        ports=[{"containerPort": 80}],
        readinessProbe={"httpGet": {"port": 80}},
        volumeMounts=[{"name": "a", "mountPath": "/a"}],
    )
    assert errors(doc) == []


def workload(kind: str, **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [copy.deepcopy(CONTAINER)]}}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template, **spec},
    }


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        (
            workload(
                "Deployment",
                strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
            ),
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
        (
            workload("Deployment", strategy={"type": "Rolling"}),
            'spec.strategy: Unsupported value: {"Type":"Rolling","RollingUpdate":null}: '
            'supported values: "Recreate", "RollingUpdate"',
        ),
        (
            workload("Deployment", progressDeadlineSeconds=5, minReadySeconds=10),
            "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
        ),
        (
            workload(
                "DaemonSet", updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}}
            ),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: "
            "cannot be 0 when maxSurge is 0",
        ),
        (
            workload("StatefulSet", podManagementPolicy="Ordered"),
            "spec.podManagementPolicy: Invalid value: \"Ordered\": must be 'OrderedReady' or 'Parallel'",
        ),
        (
            workload(
                "StatefulSet",
                volumeClaimTemplates=[
                    {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
                ],
            ),
            "spec.volumeClaimTemplates[0].spec.resources[storage]: Required value",
        ),
    ],
)
def test_a_workload_is_refused_as_the_server_refuses_it(doc: dict[str, Any], line: str) -> None:
    assert line in errors(doc)


def test_a_statefulset_mounts_its_claim_templates() -> None:
    doc = workload(
        "StatefulSet",
        volumeClaimTemplates=[
            {
                "metadata": {"name": "d"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ],
    )
    doc["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "d", "mountPath": "/d"}]
    assert errors(doc) == []


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("*/5 * * * *", None),
        ("@hourly", None),
        ("30 2 * * mon-fri", None),
        ("every 5 minutes", "expected exactly 5 fields, found 3: [every 5 minutes]"),
        ("0 */5 * * * *", "expected exactly 5 fields, found 6: [0 */5 * * * *]"),
        ("TZ=UTC 0 3 * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
        ("0 25 * * *", "end of range (25) above maximum (23): 25"),
    ],
)
def test_cron_schedules_parse_as_robfig_cron_parses_them(schedule: str, problem: str | None) -> None:
    assert schedule_problem(schedule) == problem


@pytest.mark.skipif(not zoneinfo.available_timezones(), reason="no time zone database on this machine")
def test_time_zones_are_the_iana_ones() -> None:
    assert time_zone_problem("Europe/Berlin") is None
    assert time_zone_problem("Europe/Atlantis") == "unknown time zone Europe/Atlantis"
    assert time_zone_problem("Local") == (
        "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
    )
