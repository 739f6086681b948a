"""A pod's containers as ``ValidatePodSpec`` checks them: names, images, ports, environment,
volume mounts, probes, lifecycle hooks, resources and security context.

Ported from ``pkg/apis/core/validation/validation.go`` (``validateContainerCommon``,
``validateContainers``, ``validateInitContainers``, ``validateContainerPorts``, ``ValidateEnv``,
``ValidateEnvFrom``, ``ValidateVolumeMounts``, ``ValidateVolumeDevices``, ``validateProbe``,
``validateHandler``, ``validateResourceRequirements``, ``ValidateSecurityContext``), with the
server's field paths and messages, quirks included (a mount's ``subPath`` error names
``volumeMounts.subPath`` without the index, as the server does).

The input is the container's JSON as strict decoding accepted it (every value has its JSON type),
read with the API server's defaults where it applies them before validation
(``pkg/apis/core/v1/defaults.go``: probe periods and thresholds, the HTTP probe's path and scheme,
a port's protocol, a downward-API field's apiVersion). Privileged containers are refused by
:func:`policies.validation.core.refuse_privileged`, which knows the server's flag; the DRA parts
(``resources.claims``) by :func:`policies.validation.core.validate_pod_claims`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.api.quantity import Quantity
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
)
from policies.validation.names import (
    HUGEPAGES_PREFIX,
    NATIVE_PREFIX,
    is_config_map_key,
    is_dns1123_subdomain,
    is_extended_resource_name,
    is_http_header_name,
    is_label_key,
    is_relaxed_env_var_name,
    is_valid_id,
    is_valid_port_name,
    is_valid_port_num,
    validate_dns_label,
)
from policies.validation.paths import no_backsteps, relative_no_backsteps

Json = Mapping[str, Any]
IS_NEGATIVE = "must be greater than or equal to 0"

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
_RECURSIVE_READ_ONLY = ("Disabled", "Enabled", "IfPossible")
_RESIZE_RESOURCES = ("cpu", "memory")
_RESIZE_POLICIES = ("NotRequired", "RestartContainer")
_PROC_MOUNTS = ("Default", "Unmasked")
_SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_APPARMOR_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_HTTP_SCHEMES = ("HTTP", "HTTPS")
# Fields the downward API offers to environment variables (validEnvDownwardAPIFieldPathExpressions).
_ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
# ... and to files of a downwardAPI volume (validVolumeDownwardAPIFieldPathExpressions).
VOLUME_FIELD_PATHS = (
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
)
# ConvertDownwardAPIFieldLabel accepts these (and subscripted labels/annotations) for v1.
_CONVERTIBLE_FIELD_PATHS = frozenset(_ENV_FIELD_PATHS) | {"metadata.labels", "metadata.annotations"}
_RESOURCE_FIELD_PATHS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_HUGEPAGES_FIELD_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
_CPU_DIVISORS = frozenset({"1m", "1"})
_BYTE_DIVISORS = frozenset(
    {"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)
_BYTE_DIVISOR_LIST = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"

# helper.IsStandardResourceName / IsStandardContainerResourceName / IsIntegerResourceName.
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_RESOURCES = _STANDARD_CONTAINER_RESOURCES | {
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
    "requests.storage",
    "storage",
}
_INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
POD_LEVEL_RESOURCES = ("cpu", "hugepages-", "memory")


@dataclass(frozen=True)
class PodContext:
    """What a container's checks need from its pod."""

    volumes: Mapping[str, Json]  # name -> the valid volume's source
    grace_period: int
    restart_policy: str
    host_users: bool


# --- the container lists -------------------------------------------------------------------------


def validate_containers(containers: Sequence[Json], pod: PodContext, path: Path) -> ErrorList:
    """validateContainers: at least one; names unique; probes and hooks; no restartPolicy rules
    beyond what the 1.36 server takes; host ports unique across the list."""
    if not containers:
        return [required(path)]
    errs: ErrorList = []
    names: set[str] = set()
    for i, container in enumerate(containers):
        at = path.index(i)
        errs += _container_common(container, pod, at)
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(at.child("name"), name))
        names.add(name)
        errs += _hooks_and_probes(container, pod, at)
    return errs + _host_port_conflicts(containers, path)


def validate_init_containers(
    containers: Sequence[Json], regular: Sequence[Json], pod: PodContext, path: Path
) -> ErrorList:
    """validateInitContainers: names unique among all containers; probes and hooks only for
    sidecars (``restartPolicy: Always``); host ports checked per container (they run in turn)."""
    errs: ErrorList = []
    names = {c.get("name") or "" for c in regular}
    for i, container in enumerate(containers):
        at = path.index(i)
        errs += _container_common(container, pod, at)
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(at.child("name"), name))
        elif name:
            names.add(name)
        errs += _host_port_conflicts([container], path)
        if container.get("restartPolicy") == "Always":
            errs += _hooks_and_probes(container, pod, at)
            continue
        for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
            if container.get(key) is not None:
                errs.append(
                    forbidden(
                        at.child(key), "may not be set for init containers without restartPolicy=Always"
                    )
                )
    return errs


def validate_images_for_pod(containers: Sequence[Json], path: Path) -> ErrorList:
    """validateContainerOnlyForPod: a pod's (not a template's) images have no surrounding space."""
    errs: ErrorList = []
    for i, container in enumerate(containers):
        image = container.get("image") or ""
        if image != image.strip():
            errs.append(
                invalid(path.index(i).child("image"), image, "must not have leading or trailing whitespace")
            )
    return errs


def _container_common(c: Json, pod: PodContext, path: Path) -> ErrorList:
    errs: ErrorList = []
    name = c.get("name") or ""
    errs += validate_dns_label(name, path.child("name")) if name else [required(path.child("name"))]
    if not c.get("image"):
        errs.append(required(path.child("image")))
    policy = c.get("terminationMessagePolicy") or "File"
    if policy not in _TERMINATION_MESSAGE_POLICIES:
        errs.append(
            not_supported(path.child("terminationMessagePolicy"), policy, _TERMINATION_MESSAGE_POLICIES)
        )
    mounts = c.get("volumeMounts") or []
    devices = c.get("volumeDevices") or []
    errs += _ports(c.get("ports") or [], path.child("ports"))
    errs += _env(c.get("env") or [], path.child("env"))
    errs += _env_from(c.get("envFrom") or [], path.child("envFrom"))
    errs += _volume_mounts(mounts, devices, c, pod, path.child("volumeMounts"))
    errs += _volume_devices(devices, mounts, pod, path.child("volumeDevices"))
    pull = c.get("imagePullPolicy")
    if pull and pull not in _PULL_POLICIES:
        errs.append(not_supported(path.child("imagePullPolicy"), pull, _PULL_POLICIES))
    resources = c.get("resources") or {}
    errs += validate_resource_requirements(resources, path.child("resources"), container=True)
    errs += _resize_policy(c.get("resizePolicy") or [], pod.restart_policy, path.child("resizePolicy"))
    errs += _security_context(c.get("securityContext"), pod.host_users, path.child("securityContext"))
    return errs


def _hooks_and_probes(c: Json, pod: PodContext, path: Path) -> ErrorList:
    errs: ErrorList = []
    lifecycle = c.get("lifecycle")
    if lifecycle is not None:
        for hook in ("postStart", "preStop"):
            if lifecycle.get(hook) is not None:
                errs += _handler(
                    lifecycle[hook], pod.grace_period, path.child("lifecycle", hook), probe=False
                )
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(key)
        if probe is not None:
            errs += _probe(probe, key, pod.grace_period, path.child(key))
    return errs


def _host_port_conflicts(containers: Sequence[Json], path: Path) -> ErrorList:
    """AccumulateUniqueHostPorts: protocol/hostIP/hostPort taken twice."""
    errs: ErrorList = []
    seen: set[str] = set()
    for ci, container in enumerate(containers):
        for pi, port in enumerate(container.get("ports") or []):
            host_port = port.get("hostPort") or 0
            if not host_port:
                continue
            key = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP') or ''}/{host_port}"
            if key in seen:
                errs.append(duplicate(path.index(ci).child("ports").index(pi).child("hostPort"), key))
            seen.add(key)
    return errs


# --- ports, environment ----------------------------------------------------------------------------


def _ports(ports: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        at = path.index(i)
        name = port.get("name") or ""
        if name:
            problems = is_valid_port_name(name)
            if problems:
                errs += [invalid(at.child("name"), name, msg) for msg in problems]
            elif name in names:
                errs.append(duplicate(at.child("name"), name))
            names.add(name)
        container_port = port.get("containerPort") or 0
        if not container_port:
            errs.append(required(at.child("containerPort")))
        else:
            errs += [
                invalid(at.child("containerPort"), container_port, m)
                for m in is_valid_port_num(container_port)
            ]
        host_port = port.get("hostPort") or 0
        if host_port:
            errs += [invalid(at.child("hostPort"), host_port, m) for m in is_valid_port_num(host_port)]
        protocol = port.get("protocol") or "TCP"
        if protocol not in _PROTOCOLS:
            errs.append(not_supported(at.child("protocol"), protocol, _PROTOCOLS))
    return errs


def _env(variables: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    for i, var in enumerate(variables):
        at = path.index(i)
        name = var.get("name") or ""
        if not name:
            errs.append(required(at.child("name")))
        else:
            errs += [invalid(at.child("name"), name, msg) for msg in is_relaxed_env_var_name(name)]
        errs += _env_value_from(var, at.child("valueFrom"))
    return errs


def _env_value_from(var: Json, path: Path) -> ErrorList:
    source = var.get("valueFrom")
    if source is None:
        return []
    errs: ErrorList = []
    count = 0
    if source.get("fieldRef") is not None:
        count += 1
        errs += object_field_selector(source["fieldRef"], _ENV_FIELD_PATHS, path.child("fieldRef"))
    if source.get("resourceFieldRef") is not None:
        count += 1
        errs += resource_field_selector(
            source["resourceFieldRef"], path.child("resourceFieldRef"), volume=False
        )
    for key in ("configMapKeyRef", "secretKeyRef"):
        if source.get(key) is not None:
            count += 1
            errs += _key_selector(source[key], path.child(key))
    if count == 0:
        errs.append(
            invalid(
                path,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )
        )
    elif var.get("value"):
        errs.append(invalid(path, "", "may not be specified when `value` is not empty"))
    elif count > 1:
        errs.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def object_field_selector(ref: Json, allowed: Sequence[str], path: Path) -> ErrorList:
    """validateObjectFieldSelector (apiVersion defaults to v1)."""
    api_version = ref.get("apiVersion") or "v1"
    field_path = ref.get("fieldPath") or ""
    if not field_path:
        return [required(path.child("fieldPath"))]
    base, subscript = _split_subscript(field_path)
    if api_version != "v1" or (base not in _CONVERTIBLE_FIELD_PATHS):
        problem = (
            f"field label not supported: {field_path}"
            if api_version == "v1"
            else f'unsupported version: "{api_version}"'
        )
        return [invalid(path.child("fieldPath"), field_path, f"error converting fieldPath: {problem}")]
    if subscript is not None:
        if base == "metadata.annotations":
            return [invalid(path, subscript.lower(), msg) for msg in is_label_key(subscript.lower())]
        if base == "metadata.labels":
            return [invalid(path, subscript, msg) for msg in is_label_key(subscript)]
        return [invalid(path, base, "does not support subscript")]
    if base not in allowed:
        return [not_supported(path.child("fieldPath"), base, sorted(allowed))]
    return []


def _split_subscript(field_path: str) -> tuple[str, str | None]:
    """fieldpath.SplitMaybeSubscriptedPath: ``metadata.labels['app']`` -> (metadata.labels, app)."""
    if not field_path.endswith("']"):
        return field_path, None
    base, sep, rest = field_path.partition("['")
    if not sep or not rest:
        return field_path, None
    return base, rest[:-2]


def resource_field_selector(ref: Json, path: Path, *, volume: bool) -> ErrorList:
    """validateContainerResourceFieldSelector and validateContainerResourceDivisor."""
    errs: ErrorList = []
    resource = ref.get("resource") or ""
    if volume and not ref.get("containerName"):
        errs.append(required(path.child("containerName")))
    elif not resource:
        errs.append(required(path.child("resource")))
    elif resource not in _RESOURCE_FIELD_PATHS and not resource.startswith(_HUGEPAGES_FIELD_PREFIXES):
        errs.append(not_supported(path.child("resource"), resource, _RESOURCE_FIELD_PATHS))
    divisor = ref.get("divisor")
    if divisor is None:
        return errs
    shown = Quantity.from_json(divisor).canonical()
    if Quantity.from_json(divisor).is_zero():
        return errs
    kind = resource.split(".", 1)[-1]
    if kind == "cpu" and shown not in _CPU_DIVISORS:
        errs.append(
            invalid(
                path.child("divisor"),
                resource,
                "only divisor's values 1m and 1 are supported with the cpu resource",
            )
        )
    elif kind in ("memory", "ephemeral-storage") and shown not in _BYTE_DIVISORS:
        what = "memory" if kind == "memory" else "local ephemeral storage"
        errs.append(
            invalid(
                path.child("divisor"),
                resource,
                f"only divisor's values {_BYTE_DIVISOR_LIST} are supported with the {what} resource",
            )
        )
    elif resource.startswith(_HUGEPAGES_FIELD_PREFIXES) and shown not in _BYTE_DIVISORS:
        errs.append(
            invalid(
                path.child("divisor"),
                resource,
                f"only divisor's values {_BYTE_DIVISOR_LIST} are supported with the hugepages resource",
            )
        )
    return errs


def _key_selector(ref: Json, path: Path) -> ErrorList:
    """validateConfigMapKeySelector / validateSecretKeySelector."""
    name = ref.get("name") or ""
    errs = [invalid(path.child("name"), name, msg) for msg in is_dns1123_subdomain(name)]
    key = ref.get("key") or ""
    if not key:
        return [*errs, required(path.child("key"))]
    return errs + [invalid(path.child("key"), key, msg) for msg in is_config_map_key(key)]


def _env_from(sources: Sequence[Json], path: Path) -> ErrorList:
    errs: ErrorList = []
    for i, source in enumerate(sources):
        at = path.index(i)
        prefix = source.get("prefix") or ""
        if prefix:
            errs += [invalid(at.child("prefix"), prefix, msg) for msg in is_relaxed_env_var_name(prefix)]
        count = 0
        for key in ("configMapRef", "secretRef"):
            ref = source.get(key)
            if ref is None:
                continue
            count += 1
            name = ref.get("name") or ""
            if not name:
                errs.append(required(at.child(key, "name")))
            else:
                errs += [
                    invalid(at.child(key, "name"), name, msg)
                    for msg in is_dns1123_subdomain(_prefix_name(name))
                ]
        if count == 0:
            errs.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif count > 1:
            errs.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def _prefix_name(name: str) -> str:
    """NameIsDNSSubdomain(name, prefix=true): a trailing dash is allowed (maskTrailingDash)."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


# --- volume mounts and devices --------------------------------------------------------------------


def _volume_mounts(
    mounts: Sequence[Json], devices: Sequence[Json], container: Json, pod: PodContext, path: Path
) -> ErrorList:
    errs: ErrorList = []
    device_paths = {d.get("name") or "": d.get("devicePath") or "" for d in devices}
    seen: set[str] = set()
    sc = container.get("securityContext") or {}
    privileged = bool(sc.get("privileged"))
    for i, mount in enumerate(mounts):
        at = path.index(i)
        name = mount.get("name") or ""
        mount_path = mount.get("mountPath") or ""
        if not name:
            errs.append(required(at.child("name")))
        if name not in pod.volumes:
            errs.append(not_found(at.child("name"), name))
        if not mount_path:
            errs.append(required(at.child("mountPath")))
        if mount_path in seen:
            errs.append(invalid(at.child("mountPath"), mount_path, "must be unique"))
        seen.add(mount_path)
        if name in device_paths:
            errs.append(invalid(at.child("name"), name, "must not already exist in volumeDevices"))
        if mount_path in device_paths.values():
            errs.append(
                invalid(
                    at.child("mountPath"), mount_path, "must not already exist as a path in volumeDevices"
                )
            )
        sub_path = mount.get("subPath") or ""
        sub_path_expr = mount.get("subPathExpr") or ""
        if "image" in (pod.volumes.get(name) or {}):
            if sub_path:
                errs.append(invalid(at.child("subPath"), sub_path, "not allowed in image volume sources"))
            if sub_path_expr:
                errs.append(
                    invalid(at.child("subPathExpr"), sub_path_expr, "not allowed in image volume sources")
                )
        if sub_path:
            errs += relative_no_backsteps(sub_path, path.child("subPath"))
        if sub_path_expr:
            if sub_path:
                errs.append(
                    invalid(
                        at.child("subPathExpr"),
                        sub_path_expr,
                        "subPathExpr and subPath are mutually exclusive",
                    )
                )
            errs += relative_no_backsteps(sub_path_expr, path.child("subPathExpr"))
        propagation = mount.get("mountPropagation")
        if propagation is not None:
            if propagation not in _MOUNT_PROPAGATIONS:
                errs.append(not_supported(path.child("mountPropagation"), propagation, _MOUNT_PROPAGATIONS))
            if propagation == "Bidirectional" and not privileged:
                errs.append(
                    forbidden(
                        path.child("mountPropagation"),
                        "Bidirectional mount propagation is available only to privileged containers",
                    )
                )
        errs += _recursive_read_only(mount, path.child("recursiveReadOnly"))
    return errs


def _recursive_read_only(mount: Json, path: Path) -> ErrorList:
    value = mount.get("recursiveReadOnly")
    if value is None or value == "Disabled":
        return []
    if value not in _RECURSIVE_READ_ONLY:
        return [not_supported(path, value, _RECURSIVE_READ_ONLY)]
    errs: ErrorList = []
    if not mount.get("readOnly"):
        errs.append(forbidden(path, "may only be specified when readOnly is true"))
    if mount.get("mountPropagation") not in (None, "None"):
        errs.append(forbidden(path, "may only be specified when mountPropagation is None or not specified"))
    return errs


def _volume_devices(
    devices: Sequence[Json], mounts: Sequence[Json], pod: PodContext, path: Path
) -> ErrorList:
    errs: ErrorList = []
    mount_paths = {m.get("name") or "": m.get("mountPath") or "" for m in mounts}
    names: set[str] = set()
    paths: set[str] = set()
    for i, device in enumerate(devices):
        at = path.index(i)
        name = device.get("name") or ""
        device_path = device.get("devicePath") or ""
        source = pod.volumes.get(name)
        if not name:
            errs.append(required(at.child("name")))
        if name in names:
            errs.append(invalid(at.child("name"), name, "must be unique"))
        if source is not None and "persistentVolumeClaim" not in source and "ephemeral" not in source:
            errs.append(
                invalid(
                    at.child("name"),
                    name,
                    "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
                )
            )
        if source is None:
            errs.append(not_found(at.child("name"), name))
        if not device_path:
            errs.append(required(at.child("devicePath")))
        if device_path in paths:
            errs.append(invalid(at.child("devicePath"), device_path, "must be unique"))
        if device_path and no_backsteps(device_path, at):
            errs.append(invalid(at.child("devicePath"), device_path, "can not contain backsteps ('..')"))
        else:
            paths.add(device_path)
        if name in mount_paths:
            errs.append(invalid(at.child("name"), name, "must not already exist in volumeMounts"))
        if device_path in mount_paths.values():
            errs.append(
                invalid(
                    at.child("devicePath"), device_path, "must not already exist as a path in volumeMounts"
                )
            )
        if name:
            names.add(name)
    return errs


# --- probes and hooks -----------------------------------------------------------------------------


def _probe(probe: Json, kind: str, grace_period: int, path: Path) -> ErrorList:
    """validateProbe plus the liveness/startup (successThreshold 1) and readiness rules, on the
    probe as defaulted (SetDefaults_Probe: timeout 1, period 10, success 1, failure 3)."""
    errs = _handler(probe, grace_period, path, probe=True)
    defaults = {
        "initialDelaySeconds": 0,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    for key, default in defaults.items():
        value = probe.get(key) or default
        if value < 0:
            errs.append(invalid(path.child(key), value, IS_NEGATIVE))
    grace = probe.get("terminationGracePeriodSeconds")
    if grace is not None and grace <= 0:
        errs.append(invalid(path.child("terminationGracePeriodSeconds"), grace, "must be greater than 0"))
    success = probe.get("successThreshold") or 1
    if kind != "readinessProbe" and success != 1:
        errs.append(invalid(path.child("successThreshold"), success, "must be 1"))
    if kind == "readinessProbe" and grace is not None:
        errs.append(
            invalid(path.child("terminationGracePeriodSeconds"), grace, "must not be set for readinessProbes")
        )
    return errs


def _handler(handler: Json, grace_period: int, path: Path, *, probe: bool) -> ErrorList:
    """validateHandler: exactly one of exec, httpGet, tcpSocket, grpc (probes) or sleep (hooks)."""
    kinds = ("exec", "httpGet", "tcpSocket", "grpc") if probe else ("exec", "httpGet", "tcpSocket", "sleep")
    errs: ErrorList = []
    count = 0
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        if count:
            errs.append(forbidden(path.child(kind), "may not specify more than 1 handler type"))
            continue
        count += 1
        errs += _action(kind, action, grace_period, path.child(kind))
    if count == 0:
        errs.append(required(path, "must specify a handler type"))
    return errs


def _action(kind: str, action: Json, grace_period: int, path: Path) -> ErrorList:
    if kind == "exec":
        return [] if action.get("command") else [required(path.child("command"))]
    if kind == "httpGet":
        errs: ErrorList = []
        if not (action.get("path") or "/"):
            errs.append(required(path.child("path")))
        errs += port_num_or_name(action.get("port"), path.child("port"))
        scheme = action.get("scheme") or "HTTP"
        if scheme not in _HTTP_SCHEMES:
            errs.append(not_supported(path.child("scheme"), scheme, _HTTP_SCHEMES))
        for header in action.get("httpHeaders") or []:
            name = header.get("name") or ""
            errs += [invalid(path.child("httpHeaders"), name, msg) for msg in is_http_header_name(name)]
        return errs
    if kind == "tcpSocket":
        return port_num_or_name(action.get("port"), path.child("port"))
    if kind == "grpc":
        return port_num_or_name(action.get("port") or 0, path.child("port"))
    seconds = action.get("seconds") or 0  # sleep
    if seconds < 0 or seconds > grace_period:
        detail = f"must be non-negative and less than terminationGracePeriodSeconds ({grace_period})"
        return [invalid(path, seconds, detail)]
    return []


def port_num_or_name(port: Any, path: Path) -> ErrorList:
    """ValidatePortNumOrName of an int-or-string port (absent is the integer 0)."""
    if isinstance(port, str):
        return [invalid(path, port, msg) for msg in is_valid_port_name(port)]
    number = port or 0
    return [invalid(path, number, msg) for msg in is_valid_port_num(number)]


# --- resources --------------------------------------------------------------------------------------


def _is_native(name: str) -> bool:
    return "/" not in name or NATIVE_PREFIX in name


def _is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


def resource_name_errors(name: str, path: Path) -> ErrorList:
    """validateResourceName: a qualified name; an unqualified one must be standard."""
    errs = [invalid(path, name, msg) for msg in is_label_key(name)]
    if errs:
        return errs
    quota_hugepages = _is_hugepages(name) or name.startswith("requests." + HUGEPAGES_PREFIX)
    if "/" not in name and name not in _STANDARD_RESOURCES and not quota_hugepages:
        return [invalid(path, name, "must be a standard resource type or fully qualified")]
    return []


def _container_resource_name(name: str, path: Path) -> ErrorList:
    errs = resource_name_errors(name, path)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native(name) and not is_extended_resource_name(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _pod_resource_name(name: str, path: Path) -> ErrorList:
    errs = resource_name_errors(name, path)
    if name not in ("cpu", "memory") and not _is_hugepages(name):
        errs.append(not_supported(path, name, POD_LEVEL_RESOURCES))
    return errs


def quantity_value_errors(name: str, quantity: Quantity, path: Path) -> ErrorList:
    """ValidateResourceQuantityValue: not negative; a whole number for integer resources."""
    errs: ErrorList = []
    if quantity.sign() < 0:
        errs.append(invalid(path, quantity.canonical(), IS_NEGATIVE))
    if (name in _INTEGER_RESOURCES or is_extended_resource_name(name)) and quantity.milli_value() % 1000:
        errs.append(invalid(path, quantity.canonical(), "must be an integer"))
    return errs


def _hugepage_problem(name: str, quantity: Quantity) -> str | None:
    """validateResourceQuantityHugePageValue: a whole number of pages."""
    try:
        page = Quantity.parse(name.removeprefix(HUGEPAGES_PREFIX))
    except ValueError:
        return None
    if page.sign() > 0 and quantity.as_fraction() % page.as_fraction() == 0:
        return None
    return f"{quantity.canonical()} is not positive integer multiple of {name}"


def quantities(values: Json | None) -> dict[str, Quantity]:
    return {name: Quantity.from_json(value) for name, value in (values or {}).items()}


def validate_resource_requirements(resources: Json, path: Path, *, container: bool) -> ErrorList:
    """validateResourceRequirements (containers' or, ``container=False``, the pod's), without
    ``claims`` (checked with the pod's claims)."""
    name_check = _container_resource_name if container else _pod_resource_name
    limits, requests = quantities(resources.get("limits")), quantities(resources.get("requests"))
    lim_path, req_path = path.child("limits"), path.child("requests")
    errs: ErrorList = []
    for name, quantity in limits.items():
        at = lim_path.key(name)
        errs += name_check(name, at) + quantity_value_errors(name, quantity, at)
        problem = _hugepage_problem(name, quantity) if _is_hugepages(name) else None
        if problem:
            errs.append(invalid(at, quantity.canonical(), problem))
    for name, quantity in requests.items():
        at = req_path.key(name)
        errs += name_check(name, at) + quantity_value_errors(name, quantity, at)
        limit = limits.get(name)
        if limit is not None:
            shown = limit.canonical()
            if quantity.cmp(limit) != 0 and not _overcommit_allowed(name):
                errs.append(
                    invalid(req_path, quantity.canonical(), f"must be equal to {name} limit of {shown}")
                )
            elif quantity.cmp(limit) > 0:
                errs.append(
                    invalid(
                        req_path,
                        quantity.canonical(),
                        f"must be less than or equal to {name} limit of {shown}",
                    )
                )
        elif not _overcommit_allowed(name):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        problem = _hugepage_problem(name, quantity) if _is_hugepages(name) else None
        if problem:
            errs.append(invalid(at, quantity.canonical(), problem))
    names = set(limits) | set(requests)
    if any(_is_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs


def _resize_policy(policies: Sequence[Json], restart_policy: str, path: Path) -> ErrorList:
    errs: ErrorList = []
    seen: set[str] = set()
    for i, policy in enumerate(policies):
        resource = policy.get("resourceName") or ""
        restart = policy.get("restartPolicy") or ""
        if resource in seen:
            errs.append(duplicate(path.index(i), resource))
        seen.add(resource)
        if not resource:
            errs.append(required(path))
        elif resource not in _RESIZE_RESOURCES:
            errs.append(not_supported(path, resource, _RESIZE_RESOURCES))
        if not restart:
            errs.append(required(path))
        elif restart not in _RESIZE_POLICIES:
            errs.append(not_supported(path, restart, _RESIZE_POLICIES))
        if restart_policy == "Never" and restart != "NotRequired":
            errs.append(invalid(path, restart, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
    return errs


# --- security context ---------------------------------------------------------------------------------


def _security_context(sc: Json | None, host_users: bool, path: Path) -> ErrorList:
    """ValidateSecurityContext, but for ``privileged`` (refuse_privileged knows the server's flag)."""
    if sc is None:
        return []
    errs = ids(sc, ("runAsUser", "runAsGroup"), path)
    proc_mount = sc.get("procMount")
    if proc_mount is not None:
        if proc_mount not in _PROC_MOUNTS:
            errs.append(not_supported(path.child("procMount"), proc_mount, _PROC_MOUNTS))
        if host_users and proc_mount == "Unmasked":
            errs.append(
                invalid(path.child("procMount"), proc_mount, "`hostUsers` must be false to use `Unmasked`")
            )
    errs += seccomp_profile(sc.get("seccompProfile"), path.child("seccompProfile"))
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged"):
            errs.append(
                invalid(path, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")
            )
        if "CAP_SYS_ADMIN" in ((sc.get("capabilities") or {}).get("add") or []):
            errs.append(
                invalid(
                    path,
                    "",
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                )
            )
    return errs + app_armor_profile(sc.get("appArmorProfile"), path.child("appArmorProfile"))


def ids(sc: Json, keys: Sequence[str], path: Path) -> ErrorList:
    """IsValidUserID / IsValidGroupID of the given security-context fields."""
    errs: ErrorList = []
    for key in keys:
        value = sc.get(key)
        if value is not None:
            errs += [invalid(path.child(key), value, msg) for msg in is_valid_id(value)]
    return errs


def seccomp_profile(profile: Json | None, path: Path) -> ErrorList:
    if profile is None:
        return []
    kind = profile.get("type") or ""
    errs: ErrorList = []
    if not kind:
        errs.append(required(path.child("type"), "type is required when seccompProfile is set"))
    elif kind not in _SECCOMP_TYPES:
        errs.append(not_supported(path.child("type"), kind, _SECCOMP_TYPES))
    localhost = profile.get("localhostProfile")
    if kind == "Localhost":
        if localhost is None:
            errs.append(
                required(path.child("localhostProfile"), "must be set when seccomp type is Localhost")
            )
        else:
            errs += relative_no_backsteps(localhost, path.child("localhostProfile"))
    elif localhost is not None:
        errs.append(
            invalid(path.child("localhostProfile"), "", "can only be set when seccomp type is Localhost")
        )
    return errs


def app_armor_profile(profile: Json | None, path: Path) -> ErrorList:
    if profile is None:
        return []
    kind = profile.get("type") or ""
    localhost = profile.get("localhostProfile")
    if kind == "Localhost":
        if localhost is None or not localhost.strip():
            if localhost is not None and localhost != localhost.strip():
                return [
                    invalid(path.child("localhostProfile"), localhost, "must not be padded with whitespace")
                ]
            return [required(path.child("localhostProfile"), "must be set when AppArmor type is Localhost")]
        if localhost != localhost.strip():
            return [invalid(path.child("localhostProfile"), localhost, "must not be padded with whitespace")]
        return []
    if kind in ("RuntimeDefault", "Unconfined"):
        if localhost is not None:
            return [
                invalid(
                    path.child("localhostProfile"),
                    localhost,
                    "can only be set when AppArmor type is Localhost",
                )
            ]
        return []
    if not kind:
        return [required(path.child("type"), "type is required when appArmorProfile is set")]
    return [not_supported(path.child("type"), kind, _APPARMOR_TYPES)]
