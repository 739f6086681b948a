"""Workloads (Deployment, Job, ...): their own rules and their pod template's, as the API server
checks them on create.

The template is validated as upstream's ``ValidatePodTemplateSpec`` does (labels, annotations,
the whole pod spec: :mod:`policies.validation.podspec` and the DRA parts) and reported under its
path in the workload. The workload's own rules follow ``pkg/apis/apps/validation``
(``ValidateDeploymentSpec``, ``ValidateReplicaSetSpec``, ``ValidateDaemonSetSpec``,
``ValidateStatefulSetSpec``), ``pkg/apis/batch/validation`` (``ValidateJobSpec``,
``ValidateCronJobSpec``) and ``ValidateReplicationControllerSpec``, on the workload's JSON with
the defaults of ``pkg/apis/apps/v1/defaults.go`` and ``pkg/apis/batch/v1/defaults.go``, worded as
the 1.36 server words them (checked against it by ``tests/kube/test_apiserver_agreement.py``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from policies.api.base import ObjectMeta
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.workloads import template_of
from policies.validation.core import validate_pod_claims
from policies.validation.cron import schedule_problem, time_zone_problem
from policies.validation.fielderrors import (
    OMIT,
    ErrorList,
    FieldError,
    Path,
    forbidden,
    invalid,
    not_supported,
    required,
)
from policies.validation.gosyntax import GoSyntax
from policies.validation.meta import (
    validate_annotations,
    validate_label_selector,
    validate_labels,
    validate_object_meta,
)
from policies.validation.names import is_dns1123_label, is_dns1123_subdomain, regex_error
from policies.validation.podspec import validate_claim_spec, validate_pod_spec
from policies.validation.validate import EPOCH

Json = Mapping[str, Any]
IS_NEGATIVE = "must be greater than or equal to 0"
SPEC = Path("spec")

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
# Which kind the "activeDeadlineSeconds ... is not Supported" error names.
_DEADLINE_NOUN = {
    "Deployment": "ReplicaSet",
    "ReplicaSet": "ReplicaSet",
    "StatefulSet": "StatefulSet",
    "DaemonSet": "DaemonSet",
}
_MISMATCH = "`selector` does not match template `labels`"
_CRONJOB_NAME_MAX = 52
_PERCENT_FMT = "[0-9]+%"
_COMPLETION_MODES = ("NonIndexed", "Indexed")
_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
_RETENTION_POLICIES = ("Retain", "Delete")


def _obj(value: Any) -> Json:
    return value if isinstance(value, Mapping) else {}


def validate_pod_template(pod: Pod, *, claim_volumes: tuple[str, ...] = ()) -> ErrorList:
    """A template as a pod: paths ``metadata.labels``, ``spec.containers[0]``, ... (the caller puts
    them under the template's path). ``pod`` has no name: a template's pods are named later.
    ``claim_volumes``: a StatefulSet's claim templates, which its containers may mount."""
    meta = Path("metadata")
    errs = validate_labels(pod.metadata.labels, meta.child("labels"))
    errs += validate_annotations(pod.metadata.annotations, meta.child("annotations"))
    spec = apply_defaults(pod, EPOCH).spec.to_json()
    errs += validate_pod_spec(spec, SPEC, is_pod=False, claim_volumes=claim_volumes)
    return errs + validate_pod_claims(pod)


def validate_workload(kind: str, raw: Json, template: tuple[str, ...], pod: Pod) -> ErrorList:
    """Everything said about a workload: its metadata, its own rules, then its template's."""
    spec = _obj(raw.get("spec"))
    at = Path(*template)
    errs = _metadata(kind, _obj(raw.get("metadata")))
    if kind == "ReplicationController" and not isinstance(spec.get("template"), Mapping):
        return [*errs, required(at)]
    errs += _OWN_RULES.get(kind, _no_rules)(spec, pod, at)
    claim_volumes = tuple(
        _obj(t.get("metadata")).get("name") or ""
        for t in spec.get("volumeClaimTemplates") or []
        if isinstance(t, Mapping)
    )
    unnamed = pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"name": None})})
    errs += [under(template, e) for e in validate_pod_template(unnamed, claim_volumes=claim_volumes)]
    policy = pod.spec.restart_policy or "Always"  # the pod default (SetDefaults_PodSpec)
    if kind in _CONTROLLERS and policy != "Always":
        errs.append(not_supported(at.child("spec", "restartPolicy"), policy, ["Always"]))
    if kind in _JOBS and pod.spec.restart_policy not in ("OnFailure", "Never"):
        errs.append(required(at.child("spec", "restartPolicy"), 'valid values: "OnFailure", "Never"'))
    if (
        kind in _DEADLINE_NOUN
        and _obj(template_of(raw, template).get("spec")).get("activeDeadlineSeconds") is not None
    ):
        detail = f"activeDeadlineSeconds in {_DEADLINE_NOUN[kind]} is not Supported"
        errs.append(forbidden(at.child("spec", "activeDeadlineSeconds"), detail))
    return errs


def under(template: tuple[str, ...], err: FieldError) -> FieldError:
    """A pod's error (``spec.containers[0].name``) at its place in a workload's template."""
    return dataclasses.replace(err, field=".".join(template) + "." + err.field)


def _metadata(kind: str, meta: Json) -> ErrorList:
    """ValidateObjectMeta with the kind's name rule: a StatefulSet's name is a DNS label (its pods'
    hostnames), a CronJob's at most 52 characters (its Jobs add a suffix)."""
    name_check = is_dns1123_label if kind == "StatefulSet" else is_dns1123_subdomain
    errs = validate_object_meta(ObjectMeta.model_validate(meta), True, Path("metadata"), name_check)
    name = meta.get("name") or ""
    if kind == "CronJob" and len(name) > _CRONJOB_NAME_MAX:
        errs.append(
            invalid(Path("metadata", "name"), name, f"must be no more than {_CRONJOB_NAME_MAX} characters")
        )
    return errs


def _no_rules(_spec: Json, _pod: Pod, _at: Path) -> ErrorList:
    return []


def _non_negative(spec: Json, keys: tuple[str, ...], path: Path) -> ErrorList:
    errs: ErrorList = []
    for key in keys:
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            errs.append(invalid(path.child(key), value, IS_NEGATIVE))
    return errs


def _go_struct(**fields: Any) -> GoSyntax:
    """A strategy as the server prints it: its internal Go struct as JSON (Go field names)."""
    return GoSyntax(json.dumps(fields, separators=(",", ":")))


# --- selectors --------------------------------------------------------------------------------------


def _selector(kind: str, selector: Any, labels: Mapping[str, str] | None, at: Path) -> ErrorList:
    path = SPEC.child("selector")
    mismatch = invalid(at.child("metadata", "labels"), labels, _MISMATCH)
    if kind == "ReplicationController":
        # A map; when absent it is defaulted to the template's labels (SetDefaults_ReplicationController).
        if not selector and not labels:
            return [required(path)]
        if selector and not all((labels or {}).get(k) == v for k, v in selector.items()):
            return [mismatch]
        return []
    if selector is None:
        # A nil selector matches nothing: DaemonSet says only that, the others also that it is required.
        return ([] if kind == "DaemonSet" else [required(path)]) + [mismatch]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [invalid(path, selector, f"empty selector is invalid for {_EMPTY_SELECTOR_NOUN[kind]}")]
    errs = validate_label_selector(selector, path)
    if errs:
        # LabelSelectorAsSelector fails too: the selector cannot be matched against the labels.
        if kind in ("Deployment", "ReplicaSet"):
            errs.append(invalid(path, selector, "invalid label selector"))
        elif kind == "StatefulSet":
            errs.append(invalid(path, selector, ""))
        return errs
    return [] if _matches(selector, labels or {}) else [mismatch]


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


# --- apps -------------------------------------------------------------------------------------------


def _replicated(kind: str, spec: Json, pod: Pod, at: Path) -> ErrorList:
    """What Deployments, ReplicaSets, StatefulSets and DaemonSets share."""
    keys = ("minReadySeconds",) if kind == "DaemonSet" else ("replicas", "minReadySeconds")
    errs = _non_negative(spec, keys, SPEC)
    return errs + _selector(kind, spec.get("selector"), pod.metadata.labels, at)


def _deployment(spec: Json, pod: Pod, at: Path) -> ErrorList:
    errs = _replicated("Deployment", spec, pod, at)
    errs += _non_negative(spec, ("revisionHistoryLimit",), SPEC)
    strategy = _obj(spec.get("strategy"))
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    path = SPEC.child("strategy")
    if kind == "Recreate":
        if rolling is not None:
            errs.append(
                forbidden(
                    path.child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"
                )
            )
    elif kind == "RollingUpdate":
        rolling = _obj(rolling)
        unavailable = _or(rolling.get("maxUnavailable"), "25%")
        surge = _or(rolling.get("maxSurge"), "25%")
        at_rolling = path.child("rollingUpdate")
        errs += _int_or_percent(unavailable, at_rolling.child("maxUnavailable"))
        errs += _int_or_percent(surge, at_rolling.child("maxSurge"))
        if _int_or_percent_value(unavailable) == 0 and _int_or_percent_value(surge) == 0:
            errs.append(
                invalid(at_rolling.child("maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0")
            )
        errs += _at_most_100_percent(unavailable, at_rolling.child("maxUnavailable"))
    else:
        shown = _go_struct(Type=kind, RollingUpdate=_rolling_shown(rolling, "MaxUnavailable", "MaxSurge"))
        errs.append(not_supported(path, shown, ["Recreate", "RollingUpdate"]))
    deadline = spec.get("progressDeadlineSeconds")
    deadline = 600 if deadline is None else deadline
    errs += _non_negative({"progressDeadlineSeconds": deadline}, ("progressDeadlineSeconds",), SPEC)
    if deadline <= (spec.get("minReadySeconds") or 0):
        errs.append(
            invalid(SPEC.child("progressDeadlineSeconds"), deadline, "must be greater than minReadySeconds")
        )
    return errs


def _replica_set(spec: Json, pod: Pod, at: Path) -> ErrorList:
    return _replicated("ReplicaSet", spec, pod, at)


def _daemon_set(spec: Json, pod: Pod, at: Path) -> ErrorList:
    errs = _replicated("DaemonSet", spec, pod, at)
    errs += _non_negative(spec, ("revisionHistoryLimit",), SPEC)
    strategy = _obj(spec.get("updateStrategy"))
    kind = strategy.get("type") or "RollingUpdate"
    path = SPEC.child("updateStrategy")
    if kind == "RollingUpdate":
        rolling = _obj(strategy.get("rollingUpdate"))
        unavailable, surge = _or(rolling.get("maxUnavailable"), 1), _or(rolling.get("maxSurge"), 0)
        at_rolling = path.child("rollingUpdate")
        errs += _int_or_percent(unavailable, at_rolling.child("maxUnavailable"))
        errs += _int_or_percent(surge, at_rolling.child("maxSurge"))
        errs += _at_most_100_percent(unavailable, at_rolling.child("maxUnavailable"))
        errs += _at_most_100_percent(surge, at_rolling.child("maxSurge"))
        has_unavailable = _int_or_percent_value(unavailable) != 0
        has_surge = _int_or_percent_value(surge) != 0
        if has_unavailable and has_surge:
            errs.append(
                invalid(at_rolling.child("maxSurge"), surge, "may not be set when maxUnavailable is non-zero")
            )
        elif not has_unavailable and not has_surge:
            errs.append(required(at_rolling.child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
    elif kind != "OnDelete":
        given = strategy.get("rollingUpdate")
        shown = _go_struct(Type=kind, RollingUpdate=_rolling_shown(given, "MaxUnavailable", "MaxSurge"))
        errs.append(not_supported(path, shown, ["RollingUpdate", "OnDelete"]))
    return errs


def _stateful_set(spec: Json, pod: Pod, at: Path) -> ErrorList:
    errs = _replicated("StatefulSet", spec, pod, at)
    policy = spec.get("podManagementPolicy") or "OrderedReady"
    if policy not in ("OrderedReady", "Parallel"):
        errs.append(
            invalid(SPEC.child("podManagementPolicy"), policy, "must be 'OrderedReady' or 'Parallel'")
        )
    strategy = _obj(spec.get("updateStrategy"))
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    path = SPEC.child("updateStrategy")
    if kind == "OnDelete":
        if rolling is not None:
            shown = _go_struct(
                Partition=_obj(rolling).get("partition") or 0,
                MaxUnavailable=_obj(rolling).get("maxUnavailable"),
            )
            errs.append(
                invalid(path.child("rollingUpdate"), shown, "only allowed for updateStrategy 'RollingUpdate'")
            )
    elif kind == "RollingUpdate":
        errs += _non_negative(_obj(rolling), ("partition",), path.child("rollingUpdate"))
    else:
        shown = _go_struct(Type=kind, RollingUpdate=_rolling_shown(rolling, "Partition", "MaxUnavailable"))
        errs.append(invalid(path, shown, "must be 'RollingUpdate' or 'OnDelete'"))
    retention = _obj(spec.get("persistentVolumeClaimRetentionPolicy"))
    for key in ("whenDeleted", "whenScaled"):
        value = retention.get(key) or "Retain"
        if value not in _RETENTION_POLICIES:
            errs.append(
                not_supported(
                    SPEC.child("persistentVolumeClaimRetentionPolicy", key), value, _RETENTION_POLICIES
                )
            )
    errs += _non_negative(_obj(spec.get("ordinals")), ("start",), SPEC.child("ordinals"))
    for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
        errs += validate_claim_spec(
            _obj(_obj(claim).get("spec")), SPEC.child("volumeClaimTemplates").index(i).child("spec")
        )
    return errs


def _rolling_shown(rolling: Any, *go_names: str) -> dict[str, Any] | None:
    if not isinstance(rolling, Mapping):
        return None
    return {name: rolling.get(name[0].lower() + name[1:]) for name in go_names}


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _int_or_percent(value: Any, path: Path) -> ErrorList:
    """ValidatePositiveIntOrPercent."""
    if isinstance(value, str):
        if not value.endswith("%") or not value[:-1].isdigit():
            detail = regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'",
                _PERCENT_FMT,
                "1%",
                "93%",
            )
            return [invalid(path, value, detail)]
        return []
    return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []


def _int_or_percent_value(value: Any) -> int:
    """getIntOrPercentValue: a percent's number, an int itself, anything else 0."""
    if isinstance(value, str):
        number = value[:-1] if value.endswith("%") else value
        return int(number) if number.isdigit() else 0
    return int(value)


def _at_most_100_percent(value: Any, path: Path) -> ErrorList:
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


# --- batch ------------------------------------------------------------------------------------------


def _job(spec: Json, pod: Pod, at: Path) -> ErrorList:
    return _job_spec(spec, pod, SPEC, at, in_cronjob=False)


def _job_spec(spec: Json, pod: Pod, path: Path, at: Path, *, in_cronjob: bool) -> ErrorList:
    """ValidateJobSpec (and, outside a CronJob, the generated-selector rules of ValidateJob)."""
    keys = ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished")
    errs = _non_negative(spec, keys, path)
    selector = spec.get("selector")
    if in_cronjob:
        if selector is not None:
            errs.append(invalid(path.child("selector"), selector, "`selector` will be auto-generated"))
    elif selector is None:
        if spec.get("manualSelector"):
            errs.append(required(path.child("selector")))
            errs.append(invalid(at.child("metadata", "labels"), pod.metadata.labels, _MISMATCH))
    else:
        if not spec.get("manualSelector"):
            errs.append(invalid(path.child("selector"), selector, "`selector` not auto-generated"))
        if not _matches(selector, pod.metadata.labels or {}):
            errs.append(invalid(at.child("metadata", "labels"), pod.metadata.labels, _MISMATCH))
    mode = spec.get("completionMode") or "NonIndexed"
    if mode not in _COMPLETION_MODES:
        errs.append(not_supported(path.child("completionMode"), mode, _COMPLETION_MODES))
    per_index = spec.get("backoffLimitPerIndex")
    if per_index is not None:
        errs += _non_negative(spec, ("backoffLimitPerIndex",), path)
        if mode != "Indexed":
            errs.append(
                invalid(path.child("backoffLimitPerIndex"), per_index, "requires indexed completion mode")
            )
    if spec.get("maxFailedIndexes") is not None:
        errs += _non_negative(spec, ("maxFailedIndexes",), path)
        if per_index is None:
            errs.append(required(path.child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
    policy = spec.get("podReplacementPolicy")
    if policy is not None and policy not in _REPLACEMENT_POLICIES:
        errs.append(not_supported(path.child("podReplacementPolicy"), policy, _REPLACEMENT_POLICIES))
    success = spec.get("successPolicy")
    if success is not None and mode != "Indexed":
        errs.append(
            invalid(
                path.child("successPolicy"), _go_success_policy(success), "requires indexed completion mode"
            )
        )
    return errs + _pod_failure_policy(_obj(spec.get("podFailurePolicy")), path.child("podFailurePolicy"))


def _go_success_policy(policy: Json) -> GoSyntax:
    rules = [
        {"SucceededIndexes": _obj(r).get("succeededIndexes"), "SucceededCount": _obj(r).get("succeededCount")}
        for r in policy.get("rules") or []
    ]
    return _go_struct(Rules=rules)


def _pod_failure_policy(policy: Json, path: Path) -> ErrorList:
    errs: ErrorList = []
    for i, rule in enumerate(policy.get("rules") or []):
        at = path.child("rules").index(i)
        rule = _obj(rule)
        action = rule.get("action") or ""
        if action not in _FAILURE_ACTIONS:
            errs.append(not_supported(at.child("action"), action, _FAILURE_ACTIONS))
        exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if exit_codes is None and conditions is None:
            errs.append(invalid(at, OMIT, "specifying one of OnExitCodes and OnPodConditions is required"))
        elif exit_codes is not None and conditions is not None:
            errs.append(invalid(at, OMIT, "specifying both OnExitCodes and OnPodConditions is not supported"))
        if exit_codes is not None:
            codes = _obj(exit_codes)
            operator = codes.get("operator") or ""
            for j, value in enumerate(codes.get("values") or []):
                if operator == "In" and value == 0:
                    errs.append(
                        invalid(
                            at.child("onExitCodes", "values").index(j), 0, "must not be 0 for the In operator"
                        )
                    )
    return errs


def _cron_job(spec: Json, pod: Pod, at: Path) -> ErrorList:
    errs: ErrorList = []
    schedule = spec.get("schedule") or ""
    if not schedule:
        errs.append(required(SPEC.child("schedule")))
    else:
        problem = schedule_problem(schedule)
        if problem:
            errs.append(invalid(SPEC.child("schedule"), schedule, problem))
    zone = spec.get("timeZone")
    if zone is not None:
        problem = time_zone_problem(zone)
        if problem:
            errs.append(invalid(SPEC.child("timeZone"), zone, problem))
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy not in _CONCURRENCY_POLICIES:
        errs.append(not_supported(SPEC.child("concurrencyPolicy"), policy, _CONCURRENCY_POLICIES))
    keys = ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit")
    errs += _non_negative(spec, keys, SPEC)
    job = _obj(_obj(spec.get("jobTemplate")).get("spec"))
    return errs + _job_spec(job, pod, SPEC.child("jobTemplate", "spec"), at, in_cronjob=True)


def _replication_controller(spec: Json, pod: Pod, at: Path) -> ErrorList:
    errs = _non_negative(spec, ("replicas", "minReadySeconds"), SPEC)
    return errs + _selector("ReplicationController", spec.get("selector"), pod.metadata.labels, at)


_OWN_RULES = {
    "Deployment": _deployment,
    "ReplicaSet": _replica_set,
    "DaemonSet": _daemon_set,
    "StatefulSet": _stateful_set,
    "Job": _job,
    "CronJob": _cron_job,
    "ReplicationController": _replication_controller,
}
