"""``ValidatePodSpec``: everything the API server checks in a pod's spec (a Pod's or a workload
template's) besides the DRA parts, which :func:`policies.validation.core.validate_pod_claims`
checks on the typed model.

Ported from ``pkg/apis/core/validation/validation.go`` (1.36): ``ValidatePodSpec`` and what it
calls for volumes, scheduling (node selector, affinity, tolerations, topology spread), DNS, the
pod security context, host aliases, gates, pod-level resources and the OS, plus the pod-only
rules of ``ValidatePodCreate``; containers are :mod:`policies.validation.containers`. Field paths
and messages are the server's, checked against a real kube-apiserver 1.36.2 by
``tests/kube/test_apiserver_agreement.py``.

The spec is read as strict decoding accepted it, with the defaults the server applies first
(``pkg/apis/core/v1/defaults.go``): ``restartPolicy: Always``, ``dnsPolicy: ClusterFirst``,
``terminationGracePeriodSeconds: 30``, a volume without a source is an ``emptyDir``, host ports
follow container ports on the host network, pod-level requests follow the limits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from policies.api.base import NodeSelector, NodeSelectorTerm
from policies.api.quantity import Quantity
from policies.validation.containers import (
    VOLUME_FIELD_PATHS,
    PodContext,
    app_armor_profile,
    ids,
    object_field_selector,
    quantities,
    resource_field_selector,
    seccomp_profile,
    validate_containers,
    validate_images_for_pod,
    validate_init_containers,
    validate_resource_requirements,
)
from policies.validation.core import (
    validate_node_selector,
    validate_node_selector_term,
    validate_preemption_policy,
)
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from policies.validation.ipaddr import is_ip_sloppy
from policies.validation.meta import validate_annotations, validate_label_selector, validate_labels
from policies.validation.names import (
    INT32_MAX,
    inclusive_range_error,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    validate_dns_label,
    validate_label_name,
)
from policies.validation.paths import local_non_reserved, no_backsteps, relative_no_backsteps

Json = Mapping[str, Any]

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_FS_GROUP_CHANGE_POLICIES = ("Always", "OnRootMismatch")
_SUPPLEMENTAL_GROUPS_POLICIES = ("Merge", "Strict")
_SELINUX_CHANGE_POLICIES = ("MountOption", "Recursive")
_HOST_PATH_TYPES = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)
_SCHEDULE_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_OS_NAMES = ("linux", "windows")
_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_VOLUME_MODES = ("Block", "Filesystem")
_FILE_MODE_ERROR = "must be a number between 0 and 0777 (octal), both inclusive"
_MAX_NAMESERVERS = 3
_MAX_SEARCH_PATHS = 32
_MAX_SEARCH_CHARS = 2048
_SYSCTL_FMT = "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
_SYSCTL_MAX = 253
_MIN_TOKEN_SECONDS = 10 * 60
_MAX_TOKEN_SECONDS = 1 << 32
# Every volume source in validateVolumeSource's order; the first one set counts, later ones are
# "more than 1 volume type". Upstream names downwardAPI "downwarAPI" in that error.
_VOLUME_SOURCES = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
)
_MISSPELT_SOURCE = {"downwardAPI": "downwarAPI", "cephfs": "cephFS"}
_SOURCE_CHECK_PATH = {"gcePersistentDisk": "persistentDisk"}


def validate_pod_spec(
    spec: Json, path: Path, *, pod_name: str = "", is_pod: bool, claim_volumes: Sequence[str] = ()
) -> ErrorList:
    """``ValidatePodSpec`` (and, for a Pod, the pod-only rules of ``validatePodMetadataAndSpec``
    and ``ValidatePodCreate``) of ``spec``, reported under ``path``. ``claim_volumes``: the names
    of a StatefulSet's volume claim templates, which its pods get as volumes."""
    restart_policy = spec.get("restartPolicy") or "Always"
    grace = spec.get("terminationGracePeriodSeconds")
    grace_period = 30 if grace is None else grace
    sc = spec.get("securityContext") or {}
    host_users = sc.get("hostUsers") is not False
    volumes, errs = _volumes(spec.get("volumes") or [], pod_name, path.child("volumes"))
    for name in claim_volumes:
        volumes.setdefault(name, {"name": name, "persistentVolumeClaim": {"claimName": name}})
    pod = PodContext(volumes, grace_period, restart_policy, host_users)
    containers = spec.get("containers") or []
    init_containers = spec.get("initContainers") or []
    errs += validate_containers(containers, pod, path.child("containers"))
    errs += validate_init_containers(init_containers, containers, pod, path.child("initContainers"))
    errs += _pod_resources(spec, path.child("resources"))
    errs += _host_network_ports(spec, path, is_pod=is_pod)
    if restart_policy not in _RESTART_POLICIES:
        errs.append(not_supported(path.child("restartPolicy"), restart_policy, _RESTART_POLICIES))
    dns_policy = spec.get("dnsPolicy") or "ClusterFirst"
    if dns_policy not in _DNS_POLICIES:
        errs.append(not_supported(path.child("dnsPolicy"), dns_policy, _DNS_POLICIES))
    errs += validate_labels(spec.get("nodeSelector"), path.child("nodeSelector"))
    errs += _pod_security_context(spec, path.child("securityContext"))
    errs += _affinity(spec.get("affinity"), path.child("affinity"))
    errs += _dns_config(spec.get("dnsConfig"), dns_policy, path.child("dnsConfig"))
    errs += _readiness_gates(spec.get("readinessGates") or [], path.child("readinessGates"))
    errs += _scheduling_gates(spec.get("schedulingGates") or [], path.child("schedulingGates"))
    errs += _topology_spread(
        spec.get("topologySpreadConstraints") or [], path.child("topologySpreadConstraints")
    )
    errs += _names(spec, path)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= INT32_MAX:
        errs.append(
            invalid(path.child("activeDeadlineSeconds"), deadline, inclusive_range_error(1, INT32_MAX))
        )
    errs += _tolerations(spec.get("tolerations") or [], path.child("tolerations"))
    errs += _host_aliases(spec.get("hostAliases") or [], path.child("hostAliases"))
    errs += validate_preemption_policy(spec.get("preemptionPolicy"), path.child("preemptionPolicy"))
    if spec.get("overhead") is not None:
        errs += validate_resource_requirements(
            {"limits": spec["overhead"]}, path.child("overhead"), container=True
        )
    errs += _os(spec.get("os"), path.child("os"))
    if is_pod:
        errs += _pod_only(spec, path)
    elif spec.get("ephemeralContainers"):
        errs.append(
            forbidden(path.child("ephemeralContainers"), "ephemeral containers not allowed in pod template")
        )
    return errs


def _pod_only(spec: Json, path: Path) -> ErrorList:
    errs = validate_images_for_pod(spec.get("containers") or [], path.child("containers"))
    errs += validate_images_for_pod(spec.get("initContainers") or [], path.child("initContainers"))
    if spec.get("ephemeralContainers"):
        errs.append(forbidden(path.child("ephemeralContainers"), "cannot be set on create"))
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errs.append(
            forbidden(path.child("nodeName"), "cannot be set until all schedulingGates have been cleared")
        )
    if spec.get("overhead") is not None and spec.get("runtimeClassName") is None:
        # The RuntimeClass admission plugin (plugin/pkg/admission/runtimeclass): only a
        # RuntimeClass sets a pod's overhead.
        detail = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
        errs.append(forbidden(path.child("overhead"), detail))
    return errs


def _names(spec: Json, path: Path) -> ErrorList:
    """The names a spec refers to: service account, node, host, subdomain, classes."""
    errs: ErrorList = []
    for key, check in (
        ("serviceAccountName", is_dns1123_subdomain),
        ("nodeName", is_dns1123_subdomain),
        ("priorityClassName", is_dns1123_subdomain),
    ):
        value = spec.get(key) or ""
        if value:
            errs += [invalid(path.child(key), value, msg) for msg in check(value)]
    for key in ("hostname", "subdomain"):
        value = spec.get(key) or ""
        if value:
            errs += validate_dns_label(value, path.child(key))
    runtime_class = spec.get("runtimeClassName")
    if runtime_class is not None:
        errs += [
            invalid(path.child("runtimeClassName"), runtime_class, m)
            for m in is_dns1123_subdomain(runtime_class)
        ]
    return errs


# --- volumes ---------------------------------------------------------------------------------------


def _volumes(volumes: Sequence[Json], pod_name: str, path: Path) -> tuple[dict[str, Json], ErrorList]:
    """ValidateVolumes: the valid volumes by name (mounts may only name those) and the errors."""
    valid: dict[str, Json] = {}
    errs: ErrorList = []
    for i, volume in enumerate(volumes):
        at = path.index(i)
        name = volume.get("name") or ""
        found = _volume_source(volume, name, pod_name, at)
        found += validate_dns_label(name, at.child("name")) if name else [required(at.child("name"))]
        if name in valid:
            found.append(duplicate(at.child("name"), name))
        if found:
            errs += found
        else:
            valid[name] = volume
    return valid, errs


def _volume_source(volume: Json, name: str, pod_name: str, path: Path) -> ErrorList:
    """validateVolumeSource: exactly one source (none is an emptyDir, SetDefaults_Volume)."""
    errs: ErrorList = []
    count = 0
    for key in _VOLUME_SOURCES:
        source = volume.get(key)
        if source is None:
            continue
        if count:
            errs.append(
                forbidden(
                    path.child(_MISSPELT_SOURCE.get(key, key)), "may not specify more than 1 volume type"
                )
            )
            continue
        count += 1
        errs += _source(key, source, name, pod_name, path)
    return errs


def _source(key: str, source: Json, name: str, pod_name: str, path: Path) -> ErrorList:
    at = path.child(_SOURCE_CHECK_PATH.get(key, key))
    if key == "emptyDir":
        limit = source.get("sizeLimit")
        if limit is not None and Quantity.from_json(limit).sign() < 0:
            return [forbidden(at.child("sizeLimit"), "SizeLimit field must be a valid resource quantity")]
        return []
    if key == "hostPath":
        host_path = source.get("path") or ""
        if not host_path:
            return [required(at.child("path"))]
        errs = no_backsteps(host_path, at.child("path"))
        kind = source.get("type")
        if kind is not None and kind not in _HOST_PATH_TYPES:
            errs.append(not_supported(at.child("type"), kind, _HOST_PATH_TYPES))
        return errs
    if key in ("secret", "configMap"):
        name_key = "secretName" if key == "secret" else "name"
        errs = [] if source.get(name_key) else [required(at.child(name_key))]
        errs += _file_mode(source.get("defaultMode"), at.child("defaultMode"))
        for i, item in enumerate(source.get("items") or []):
            errs += _key_to_path(item, at.child("items").index(i))
        return errs
    if key == "persistentVolumeClaim":
        return [] if source.get("claimName") else [required(at.child("claimName"))]
    if key == "downwardAPI":
        errs = _file_mode(source.get("defaultMode"), at.child("defaultMode"))
        for item in source.get("items") or []:
            errs += _downward_file(item, at)
        return errs
    if key == "projected":
        return _file_mode(source.get("defaultMode"), at.child("defaultMode")) + _projection(source, at)
    if key == "csi":
        return _csi(source, at)
    if key == "ephemeral":
        return _ephemeral(source, name, pod_name, path, at)
    if key == "nfs":
        return _nfs(source, at)
    if key == "gitRepo":
        errs = [] if source.get("repository") else [required(at.child("repository"))]
        return errs + relative_no_backsteps(source.get("directory") or "", at.child("directory"))
    if key == "image":
        return [] if source.get("reference") else [required(at.child("reference"))]
    return []


def _file_mode(mode: int | None, path: Path) -> ErrorList:
    if mode is not None and not 0 <= mode <= 0o777:
        return [invalid(path, mode, _FILE_MODE_ERROR)]
    return []


def _key_to_path(item: Json, path: Path) -> ErrorList:
    errs: ErrorList = []
    if not item.get("key"):
        errs.append(required(path.child("key")))
    target = item.get("path") or ""
    if not target:
        errs.append(required(path.child("path")))
    errs += local_non_reserved(target, path.child("path"))
    return errs + _file_mode(item.get("mode"), path.child("mode"))


def _downward_file(item: Json, path: Path) -> ErrorList:
    """validateDownwardAPIVolumeFile; upstream reports these under the volume's path, not the item's."""
    target = item.get("path") or ""
    errs: ErrorList = [] if target else [required(path.child("path"))]
    errs += local_non_reserved(target, path.child("path"))
    field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
    if field_ref is not None:
        errs += object_field_selector(field_ref, VOLUME_FIELD_PATHS, path.child("fieldRef"))
        if resource_ref is not None:
            errs.append(
                invalid(path, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously")
            )
    elif resource_ref is not None:
        errs += resource_field_selector(resource_ref, path.child("resourceFieldRef"), volume=True)
    else:
        errs.append(required(path, "one of fieldRef and resourceFieldRef is required"))
    return errs + _file_mode(item.get("mode"), path.child("mode"))


def _projection(source: Json, path: Path) -> ErrorList:
    """validateProjectionSources: one kind per source, no path twice."""
    errs: ErrorList = []
    paths: set[str] = set()

    def claim(target: str, shown: str) -> None:
        if target in paths:
            errs.append(invalid(path, shown, "conflicting duplicate paths"))
        paths.add(target)

    for i, item in enumerate(source.get("sources") or []):
        at = path.child("sources").index(i)
        kinds = [
            k
            for k in ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle")
            if item.get(k) is not None
        ]
        for kind in ("secret", "configMap"):
            ref = item.get(kind)
            if ref is None:
                continue
            if not ref.get("name"):
                errs.append(required(at.child(kind, "name")))
            for j, entry in enumerate(ref.get("items") or []):
                errs += _key_to_path(entry, at.child(kind, "items").index(j))
                if entry.get("path"):
                    claim(entry["path"], ref.get("name") or "")
        downward = item.get("downwardAPI")
        for entry in (downward or {}).get("items") or []:
            errs += _downward_file(entry, at.child("downwardAPI"))
            if entry.get("path"):
                claim(entry["path"], entry["path"])
        token = item.get("serviceAccountToken")
        if token is not None:
            errs += _token(token, at.child("serviceAccountToken"), path)
        if len(kinds) > 1:
            errs.append(forbidden(at, "may not specify more than 1 volume type per source"))
    return errs


def _token(token: Json, at: Path, volume: Path) -> ErrorList:
    seconds = token.get("expirationSeconds") or 3600  # SetDefaults_ServiceAccountTokenProjection
    errs: ErrorList = []
    if seconds < _MIN_TOKEN_SECONDS:
        errs.append(
            invalid(at.child("expirationSeconds"), seconds, "may not specify a duration less than 10 minutes")
        )
    if seconds > _MAX_TOKEN_SECONDS:
        errs.append(
            invalid(
                at.child("expirationSeconds"), seconds, "may not specify a duration larger than 2^32 seconds"
            )
        )
    target = token.get("path") or ""
    if not target:
        errs.append(required(volume.child("path")))
    else:
        errs += local_non_reserved(target, volume.child("path"))
    return errs


def _csi(source: Json, path: Path) -> ErrorList:
    driver = source.get("driver") or ""
    at = path.child("driver")
    errs: ErrorList = [] if driver else [required(at)]
    if len(driver) > 63:
        errs.append(invalid(at, driver, "may not be more than 63 bytes"))
    errs += [invalid(at, driver, msg) for msg in is_dns1123_subdomain(driver.lower())]
    secret = source.get("nodePublishSecretRef")
    if secret is not None:
        name = secret.get("name") or ""
        if not name:
            errs.append(required(path.child("nodePublishSecretRef", "name")))
        errs += [invalid(path.child("name"), name, msg) for msg in is_dns1123_subdomain(name)] if name else []
    return errs


def _nfs(source: Json, path: Path) -> ErrorList:
    errs: ErrorList = []
    if not source.get("server"):
        errs.append(required(path.child("server")))
    nfs_path = source.get("path") or ""
    if not nfs_path:
        errs.append(required(path.child("path")))
    if not nfs_path.startswith("/"):
        errs.append(invalid(path.child("path"), nfs_path, "must be an absolute path"))
    return errs


def _ephemeral(source: Json, name: str, pod_name: str, volume: Path, path: Path) -> ErrorList:
    template = source.get("volumeClaimTemplate")
    if template is None:
        return [required(path.child("volumeClaimTemplate"))]
    at = path.child("volumeClaimTemplate")
    errs = validate_template_meta(template.get("metadata") or {}, at.child("metadata"))
    errs += validate_claim_spec(template.get("spec") or {}, at.child("spec"))
    if pod_name and name:
        claim = f"{pod_name}-{name}"
        errs += [
            invalid(volume.child("name"), name, f'PVC name "{claim}": {msg}')
            for msg in is_dns1123_subdomain(claim)
        ]
    return errs


def validate_template_meta(meta: Json, path: Path) -> ErrorList:
    """ValidateTemplateObjectMeta of raw metadata: labels and annotations, nothing else."""
    errs = validate_annotations(meta.get("annotations"), path.child("annotations"))
    errs += validate_labels(meta.get("labels"), path.child("labels"))
    for key, value in meta.items():
        if key not in ("labels", "annotations") and value not in (None, "", 0):
            errs.append(forbidden(path.child("uID" if key == "uid" else key), "cannot be set"))
    return errs


def validate_claim_spec(spec: Json, path: Path) -> ErrorList:
    """ValidatePersistentVolumeClaimSpec, the parts a manifest's claim template exercises."""
    errs: ErrorList = []
    modes = spec.get("accessModes") or []
    if not modes:
        errs.append(required(path.child("accessModes"), "at least 1 access mode is required"))
    for mode in modes:
        if mode not in _ACCESS_MODES:
            errs.append(not_supported(path.child("accessModes"), mode, _ACCESS_MODES))
    if "ReadWriteOncePod" in modes and any(m != "ReadWriteOncePod" and m in _ACCESS_MODES for m in modes):
        errs.append(
            forbidden(path.child("accessModes"), "may not use ReadWriteOncePod with other access modes")
        )
    if spec.get("selector") is not None:
        errs += validate_label_selector(spec["selector"], path.child("selector"))
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    storage_path = path.child("resources").key("storage")
    if storage is None:
        errs.append(required(storage_path))
    elif Quantity.from_json(storage).sign() <= 0:
        errs.append(
            invalid(storage_path, Quantity.from_json(storage).canonical(), "must be greater than zero")
        )
    class_name = spec.get("storageClassName") or ""
    if class_name:
        errs += [
            invalid(path.child("storageClassName"), class_name, m) for m in is_dns1123_subdomain(class_name)
        ]
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(not_supported(path.child("volumeMode"), mode, _VOLUME_MODES))
    return errs


# --- scheduling ----------------------------------------------------------------------------------


def _affinity(affinity: Json | None, path: Path) -> ErrorList:
    if affinity is None:
        return []
    errs: ErrorList = []
    node = affinity.get("nodeAffinity")
    if node is not None:
        at = path.child("nodeAffinity")
        required_terms = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required_terms is not None:
            errs += validate_node_selector(
                NodeSelector.model_validate(required_terms),
                at.child("requiredDuringSchedulingIgnoredDuringExecution"),
            )
        for i, term in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            item = at.child("preferredDuringSchedulingIgnoredDuringExecution").index(i)
            errs += _weight(term.get("weight") or 0, item.child("weight"))
            # Preferred terms may hold any label value: they can succeed on a one-node cluster.
            preference = NodeSelectorTerm.model_validate(term.get("preference") or {})
            errs += validate_node_selector_term(preference, item.child("preference"), check_values=False)
    for key in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(key)
        if terms is None:
            continue
        at = path.child(key)
        for i, term in enumerate(terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            errs += _pod_affinity_term(
                term, at.child("requiredDuringSchedulingIgnoredDuringExecution").index(i)
            )
        for i, weighted in enumerate(terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            item = at.child("preferredDuringSchedulingIgnoredDuringExecution").index(i)
            errs += _weight(weighted.get("weight") or 0, item.child("weight"))
            errs += _pod_affinity_term(weighted.get("podAffinityTerm") or {}, item.child("podAffinityTerm"))
    return errs


def _weight(weight: int, path: Path) -> ErrorList:
    return [] if 1 <= weight <= 100 else [invalid(path, weight, "must be in the range 1-100")]


def _pod_affinity_term(term: Json, path: Path) -> ErrorList:
    """validatePodAffinityTerm (namespaces are reported as ``namespace``, as upstream does)."""
    selector = term.get("labelSelector")
    errs = validate_label_selector(selector, path.child("labelSelector"))
    errs += validate_label_selector(term.get("namespaceSelector"), path.child("namespaceSelector"))
    for name in term.get("namespaces") or []:
        errs += [invalid(path.child("namespace"), name, msg) for msg in is_dns1123_label(name)]
    errs += _label_keys(term, selector, path)
    topology_key = term.get("topologyKey") or ""
    if not topology_key:
        errs.append(required(path.child("topologyKey"), "can not be empty"))
    return errs + validate_label_name(topology_key, path.child("topologyKey"))


def _label_keys(term: Json, selector: Json | None, path: Path) -> ErrorList:
    """validateMatchLabelKeysAndMismatchLabelKeys."""
    errs: ErrorList = []
    match_keys = term.get("matchLabelKeys") or []
    mismatch_keys = term.get("mismatchLabelKeys") or []
    for key, keys in (("matchLabelKeys", match_keys), ("mismatchLabelKeys", mismatch_keys)):
        if keys and selector is None:
            errs.append(forbidden(path.child(key), "must not be specified when labelSelector is not set"))
        elif keys:
            for i, name in enumerate(keys):
                errs += validate_label_name(name, path.child(key).index(i))
    for i, name in enumerate(match_keys):
        if name in mismatch_keys:
            errs.append(
                invalid(
                    path.child("matchLabelKeys").index(i),
                    name,
                    "exists in both matchLabelKeys and mismatchLabelKeys",
                )
            )
    return errs


def _tolerations(tolerations: Sequence[Json], path: Path) -> ErrorList:
    """ValidateTolerations."""
    errs: ErrorList = []
    for i, toleration in enumerate(tolerations):
        at = path.index(i)
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or ""
        effect = toleration.get("effect") or ""
        value = toleration.get("value") or ""
        if key:
            errs += validate_label_name(key, at.child("key"))
        if not key and operator != "Exists":
            errs.append(
                invalid(
                    at.child("operator"),
                    operator,
                    "operator must be Exists when `key` is empty, "
                    'which means "match all values and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(
                invalid(
                    at.child("effect"), effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"
                )
            )
        if operator in ("Equal", ""):
            problems = is_label_value(value)
            if problems:
                errs.append(invalid(at.child("operator"), value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                errs.append(
                    invalid(at.child("operator"), value, "value must be empty when `operator` is 'Exists'")
                )
        else:
            errs.append(not_supported(at.child("operator"), operator, _TOLERATION_OPERATORS))
        if effect and effect not in _TAINT_EFFECTS:
            errs.append(not_supported(at.child("effect"), effect, _TAINT_EFFECTS))
    return errs


def _topology_spread(constraints: Sequence[Json], path: Path) -> ErrorList:
    """validateTopologySpreadConstraints."""
    errs: ErrorList = []
    for i, constraint in enumerate(constraints):
        at = path.index(i)
        skew = constraint.get("maxSkew") or 0
        if skew <= 0:
            errs.append(invalid(at.child("maxSkew"), skew, "must be greater than zero"))
        key = constraint.get("topologyKey") or ""
        if not key:
            errs.append(required(at.child("topologyKey"), "can not be empty"))
        action = constraint.get("whenUnsatisfiable") or ""
        if action not in _SCHEDULE_ACTIONS:
            errs.append(not_supported(at.child("whenUnsatisfiable"), action, _SCHEDULE_ACTIONS))
        for later in constraints[i + 1 :]:
            if (later.get("topologyKey") or "", later.get("whenUnsatisfiable") or "") == (key, action):
                errs.append(duplicate(at.child("{topologyKey, whenUnsatisfiable}"), f"{{{key}, {action}}}"))
                break
        min_domains = constraint.get("minDomains")
        if min_domains is not None:
            if min_domains <= 0:
                errs.append(invalid(at.child("minDomains"), min_domains, "must be greater than zero"))
            if action != "DoNotSchedule":
                errs.append(
                    invalid(
                        at.child("minDomains"),
                        min_domains,
                        f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}",
                    )
                )
        for policy_key in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = constraint.get(policy_key)
            if policy is not None and policy not in _NODE_INCLUSION_POLICIES:
                errs.append(not_supported(at.child(policy_key), policy, _NODE_INCLUSION_POLICIES))
        errs += _spread_label_keys(constraint, at.child("matchLabelKeys"))
        errs += validate_label_selector(constraint.get("labelSelector"), at.child("labelSelector"))
    return errs


def _spread_label_keys(constraint: Json, path: Path) -> ErrorList:
    """validateMatchLabelKeysInTopologySpread with the selector merge of 1.34+: the API server has
    already added ``key In (value)`` to the selector for each matchLabelKeys key, so a key is a
    duplicate only where an expression names it after matchLabels or an earlier expression did
    (a stored pod, read back, carries the merged expression)."""
    keys = constraint.get("matchLabelKeys") or []
    if not keys:
        return []
    selector = constraint.get("labelSelector")
    errs: ErrorList = []
    if selector is None:
        errs.append(forbidden(path, "must not be specified when labelSelector is not set"))
    for i, key in enumerate(keys):
        errs += validate_label_name(key, path.index(i))
    position = {key: i for i, key in enumerate(keys)}
    seen = set((selector or {}).get("matchLabels") or {})
    for expression in (selector or {}).get("matchExpressions") or []:
        key = expression.get("key")
        if key in position and key in seen:
            errs.append(
                invalid(path.index(position[key]), key, "exists in both matchLabelKeys and labelSelector")
            )
        seen.add(key)
    return errs


def _host_network_ports(spec: Json, path: Path, *, is_pod: bool) -> ErrorList:
    """validatePodHostNetworkDeps: on the host network a host port is the container port (a
    template may leave it 0: the pod's defaulting fills it in)."""
    if not spec.get("hostNetwork"):
        return []
    errs: ErrorList = []
    for i, container in enumerate(spec.get("containers") or []):
        for j, port in enumerate(container.get("ports") or []):
            host, number = port.get("hostPort") or 0, port.get("containerPort") or 0
            if (is_pod or host) and host != number:
                at = path.child("containers").index(i).child("ports").index(j).child("hostPort")
                errs.append(invalid(at, host, "must match `containerPort` when `hostNetwork` is true"))
    return errs


# --- DNS, gates, host aliases, OS ------------------------------------------------------------------


def _dns_config(config: Json | None, policy: str, path: Path) -> ErrorList:
    if policy == "None":
        if config is None:
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [
                required(
                    path.child("nameservers"),
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            ]
    if config is None:
        return []
    errs: ErrorList = []
    servers = config.get("nameservers") or []
    if len(servers) > _MAX_NAMESERVERS:
        errs.append(
            invalid(
                path.child("nameservers"), servers, f"must not have more than {_MAX_NAMESERVERS} nameservers"
            )
        )
    for i, server in enumerate(servers):
        errs += _ip(server, path.child("nameservers").index(i))
    searches = config.get("searches") or []
    if len(searches) > _MAX_SEARCH_PATHS:
        errs.append(
            invalid(
                path.child("searches"), searches, f"must not have more than {_MAX_SEARCH_PATHS} search paths"
            )
        )
    if len(" ".join(searches)) > _MAX_SEARCH_CHARS:
        errs.append(
            invalid(
                path.child("searches"),
                searches,
                f"must not have more than {_MAX_SEARCH_CHARS} characters (including spaces) "
                "in the search list",
            )
        )
    for i, search in enumerate(searches):
        if search != ".":
            name = search.removesuffix(".")
            # AllowRelaxedDNSSearchValidation (GA): underscores allowed where letters are.
            problems = is_dns1123_subdomain(name.replace("_", "a"))
            errs += [invalid(path.child("searches").index(i), name, msg) for msg in problems]
    for i, option in enumerate(config.get("options") or []):
        if not option.get("name"):
            errs.append(required(path.child("options").index(i), "must not be empty"))
    return errs


def _ip(value: str, path: Path) -> ErrorList:
    if is_ip_sloppy(value):
        return []
    return [invalid(path, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]


def _readiness_gates(gates: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    for i, gate in enumerate(gates):
        condition = gate.get("conditionType") or ""
        errs += [invalid(path.index(i).child("conditionType"), condition, m) for m in is_label_key(condition)]
    return errs


def _scheduling_gates(gates: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    seen: set[str] = set()
    for i, gate in enumerate(gates):
        name = gate.get("name") or ""
        errs += [invalid(path.index(i), name, msg) for msg in is_label_key(name)]
        if name in seen:
            errs.append(duplicate(path.index(i), name))
        seen.add(name)
    return errs


def _host_aliases(aliases: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    for i, alias in enumerate(aliases):
        at = path.index(i)
        errs += _ip(alias.get("ip") or "", at.child("ip"))
        for j, hostname in enumerate(alias.get("hostnames") or []):
            errs += [
                invalid(at.child("hostnames").index(j), hostname, m) for m in is_dns1123_subdomain(hostname)
            ]
    return errs


def _os(os: Json | None, path: Path) -> ErrorList:
    if os is None:
        return []
    name = os.get("name") or ""
    if not name:
        return [required(path.child("name"), "cannot be empty")]
    return [] if name in _OS_NAMES else [not_supported(path, name, _OS_NAMES)]


# --- the pod's security context -------------------------------------------------------------------


def _pod_security_context(spec: Json, path: Path) -> ErrorList:
    """validatePodSpecSecurityContext (v1 keeps hostNetwork, hostPID and hostIPC in the spec)."""
    sc = spec.get("securityContext")
    if sc is None:
        return []
    errs = ids(sc, ("fsGroup", "runAsUser", "runAsGroup"), path)
    for i, gid in enumerate(sc.get("supplementalGroups") or []):
        errs += ids({"g": gid}, ("g",), path.child("supplementalGroups").index(i))
    share = spec.get("shareProcessNamespace")
    if share and spec.get("hostPID"):
        errs.append(
            invalid(
                path.child("shareProcessNamespace"),
                share,
                "ShareProcessNamespace and HostPID cannot both be enabled",
            )
        )
    errs += _sysctls(sc.get("sysctls") or [], spec, path.child("sysctls"))
    for key, allowed in (
        ("fsGroupChangePolicy", _FS_GROUP_CHANGE_POLICIES),
        ("supplementalGroupsPolicy", _SUPPLEMENTAL_GROUPS_POLICIES),
        ("seLinuxChangePolicy", _SELINUX_CHANGE_POLICIES),
    ):
        value = sc.get(key)
        if value is not None and value not in allowed:
            errs.append(not_supported(path.child(key), value, allowed))
    errs += seccomp_profile(sc.get("seccompProfile"), path.child("seccompProfile"))
    return errs + app_armor_profile(sc.get("appArmorProfile"), path.child("appArmorProfile"))


def _sysctls(sysctls: Sequence[Json], spec: Json, path: Path) -> ErrorList:
    errs: ErrorList = []
    names: set[str] = set()
    for i, sysctl in enumerate(sysctls):
        at = path.index(i).child("name")
        name = sysctl.get("name") or ""
        if not name:
            errs.append(required(at))
        elif len(name) > _SYSCTL_MAX or not re.match(_SYSCTL_FMT, name):
            errs.append(
                invalid(at, name, f"must have at most {_SYSCTL_MAX} characters and match regex {_SYSCTL_FMT}")
            )
        elif name in names:
            errs.append(duplicate(at, name))
        if spec.get("hostNetwork") and name.startswith("net."):
            errs.append(invalid(at, name, "may not be specified when 'hostNetwork' is true"))
        if spec.get("hostIPC") and (
            name.startswith(("kernel.shm", "kernel.msg", "fs.mqueue.")) or name == "kernel.sem"
        ):
            errs.append(invalid(at, name, "may not be specified when 'hostIPC' is true"))
        names.add(name)
    return errs


# --- pod-level resources ---------------------------------------------------------------------------


def _pod_resources(spec: Json, path: Path) -> ErrorList:
    """validatePodResources: the pod's own requirements and their consistency with the
    containers' (PodLevelResources is on in 1.36)."""
    resources = spec.get("resources")
    if resources is None:
        return []
    limits = quantities(resources.get("limits"))
    requests = _pod_requests(spec, limits, quantities(resources.get("requests")))
    defaulted = {"limits": resources.get("limits"), "requests": {k: v.original for k, v in requests.items()}}
    errs = validate_resource_requirements(defaulted, path, container=False)
    aggregate = _aggregate_requests(spec)
    for name, total in aggregate.items():
        own = requests.get(name)
        if own is not None and total.cmp(own) > 0:  # only resources the pod itself requests
            errs.append(
                invalid(
                    path.child("requests").key(name),
                    own.canonical(),
                    f"must be greater than or equal to aggregate container requests of {total.canonical()}",
                )
            )
    for i, container in enumerate(spec.get("containers") or []):
        for name, limit in quantities((container.get("resources") or {}).get("limits")).items():
            pod_limit = limits.get(name)
            if pod_limit is not None and limit.cmp(pod_limit) > 0:
                at = path.child("containers").index(i).key(name).child("limits")
                errs.append(
                    invalid(
                        at,
                        limit.canonical(),
                        f"must be less than or equal to pod limits of {pod_limit.canonical()}",
                    )
                )
    return errs


def _pod_requests(
    spec: Json, limits: dict[str, Quantity], requests: dict[str, Quantity]
) -> dict[str, Quantity]:
    """defaultPodRequests: a limited resource without a pod-level request gets the containers'
    aggregate request when some container requests it, the pod's limit otherwise."""
    aggregate = _aggregate_requests(spec)
    found = dict(requests)
    for name, limit in limits.items():
        if name in found or (name not in ("cpu", "memory") and not name.startswith("hugepages-")):
            continue
        found[name] = aggregate.get(name, limit)
    return found


def _aggregate_requests(spec: Json) -> dict[str, Quantity]:
    """resourcehelper.AggregateContainerRequests: regular containers and sidecars add up; an init
    container runs alone (with the sidecars started before it), so the pod needs the larger."""
    total: dict[str, Quantity] = {}
    sidecars: dict[str, Quantity] = {}
    peak: dict[str, Quantity] = {}
    for container in spec.get("initContainers") or []:
        own = quantities((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            for name, value in own.items():
                sidecars[name] = sidecars[name].add(value) if name in sidecars else value
            continue
        for name, value in own.items():
            need = value.add(sidecars[name]) if name in sidecars else value
            if name not in peak or need.cmp(peak[name]) > 0:
                peak[name] = need
    for container in spec.get("containers") or []:
        for name, value in quantities((container.get("resources") or {}).get("requests")).items():
            total[name] = total[name].add(value) if name in total else value
    for name, value in sidecars.items():
        total[name] = total[name].add(value) if name in total else value
    for name, value in peak.items():
        if name not in total or value.cmp(total[name]) > 0:
            total[name] = value
    return total
