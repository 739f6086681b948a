"""Nodes, Namespaces and ResourceQuotas as kube-apiserver 1.36 validates them, past their metadata.

The rules of ``pkg/apis/core/validation/validation.go`` (``ValidateNode``/``ValidateNodeUpdate``,
``ValidateNamespace``, ``ValidateResourceQuota``/``ValidateResourceQuotaUpdate``) with the sets of
``pkg/apis/core/helper/helpers.go`` (standard quota resources, quota scopes and the resources each
scope applies to), checked against kube-apiserver 1.36.2 in ``tests/kube/test_core_kinds_agreement.py``.
Upstream's quirks are kept, since they are what a user reads: a Node's taints are reported under
``metadata.taints[i]`` (upstream passes the metadata path), a Namespace's finalizers under
``spec.finalizers`` without an index, a scope selector's problems under
``spec.scopeSelector.matchExpressions`` without an index, and values shown as the Go structs
print (``{"Key":"a","Value":"","Effect":"NoSchedule","TimeAdded":null}``).

The objects are read as JSON (their v1 form): v1's ``spec.podCIDR`` becomes the first of
``spec.podCIDRs`` as the v1-to-internal conversion makes it. What is not reproduced: the wording
of Go's JSON decoder for the two deprecated Node annotations holding JSON
(``scheduler.alpha.kubernetes.io/taints`` and ``.../preferAvoidPods``; the field and the refusal
are the server's, the detail is draguard's), and the deprecated ``spec.configSource`` and
``status.config`` of a Node update.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from policies.api.quantity import Quantity
from policies.validation.containers import quantity_value_errors, resource_name_errors
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    duplicate,
    forbidden,
    internal,
    invalid,
    not_supported,
    required,
)
from policies.validation.gosyntax import GoSyntax
from policies.validation.ipaddr import is_ipv4, parse_cidr_sloppy
from policies.validation.meta import finalizer_name_errors
from policies.validation.names import is_label_value, validate_label_name

Json = Mapping[str, Any]

META = Path("metadata")
SPEC = Path("spec")
STATUS = Path("status")

# --- ResourceQuota --------------------------------------------------------------------------------

STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_PVC = frozenset({"persistentvolumeclaims", "requests.storage"})
# Scope -> the standard quota resources it applies to (IsResourceQuotaScopeValidForResource).
SCOPE_RESOURCES: dict[str, frozenset[str]] = {
    "Terminating": _POD_COUNT | _POD_COMPUTE,
    "NotTerminating": _POD_COUNT | _POD_COMPUTE,
    "NotBestEffort": _POD_COUNT | _POD_COMPUTE,
    "PriorityClass": _POD_COUNT | _POD_COMPUTE,
    "CrossNamespacePodAffinity": _POD_COUNT | _POD_COMPUTE,
    "BestEffort": _POD_COUNT,
    "VolumeAttributesClass": _PVC,
}
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
_EXISTS_ONLY_MESSAGE = (
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort "
    "or ResourceQuotaScopeCrossNamespacePodAffinity"
)
_CONFLICTING = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))


def _is_standard_quota_resource(name: str) -> bool:
    return name in STANDARD_QUOTA_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))


def _quota_resources(resources: Json | None, path: Path) -> ErrorList:
    """``ValidateResourceQuotaResourceName`` and ``ValidateResourceQuantityValue`` for each entry."""
    errs: ErrorList = []
    for name, value in (resources or {}).items():
        at = path.key(name)
        errs += resource_name_errors(name, at)
        if "/" not in name and not _is_standard_quota_resource(name):
            errs.append(invalid(at, name, "must be a standard resource for quota"))
        errs += quantity_value_errors(name, Quantity.from_json(value), at)
    return errs


def _scopes(spec: Json, hard: Sequence[str]) -> ErrorList:
    """``validateResourceQuotaScopes``: known scopes, each valid for every standard hard resource."""
    scopes = spec.get("scopes")
    if not scopes:
        return []
    path = SPEC.child("scopes")
    errs: ErrorList = []
    for scope in scopes:
        if scope not in SCOPE_RESOURCES:
            errs.append(invalid(path, scopes, "unsupported scope"))
        errs += [
            invalid(path, scopes, "unsupported scope applied to resource")
            for name in sorted(hard)
            if _is_standard_quota_resource(name) and name not in SCOPE_RESOURCES.get(scope, {name})
        ]
    return errs + _conflicts(set(scopes), path, scopes)


def _conflicts(scopes: set[str], path: Path, shown: Any) -> ErrorList:
    return [invalid(path, shown, "conflicting scopes") for pair in _CONFLICTING if scopes.issuperset(pair)]


def _go_scope_selector(selector: Json) -> GoSyntax:
    """The scope selector as upstream shows it: its Go struct marshalled, field names as in Go."""
    expressions = [
        {"ScopeName": e.get("scopeName", ""), "Operator": e.get("operator", ""), "Values": e.get("values")}
        for e in selector.get("matchExpressions") or []
    ]
    return GoSyntax(json.dumps({"MatchExpressions": expressions}, separators=(",", ":")))


def _scope_selector(spec: Json, hard: Sequence[str]) -> ErrorList:
    """``validateScopedResourceSelectorRequirement``, every error under ``matchExpressions``."""
    selector = spec.get("scopeSelector")
    if selector is None:
        return []
    path = SPEC.child("scopeSelector", "matchExpressions")
    errs: ErrorList = []
    seen: set[str] = set()
    for req in selector.get("matchExpressions") or []:
        scope, operator, values = req.get("scopeName", ""), req.get("operator", ""), req.get("values") or []
        if scope not in SCOPE_RESOURCES:
            errs.append(invalid(path.child("scopeName"), scope, "unsupported scope"))
        errs += [
            invalid(path, _go_scope_selector(selector), "unsupported scope applied to resource")
            for name in sorted(hard)
            if _is_standard_quota_resource(name) and name not in SCOPE_RESOURCES.get(scope, {name})
        ]
        if scope in _EXISTS_ONLY and operator != "Exists":
            errs.append(invalid(path.child("operator"), operator, _EXISTS_ONLY_MESSAGE))
        errs += _selector_operator(operator, values, path)
        seen.add(scope)
    return errs + _conflicts(seen, path, spec.get("scopes"))


def _selector_operator(operator: str, values: list[Any], path: Path) -> ErrorList:
    if operator in ("In", "NotIn"):
        if not values:
            return [
                required(
                    path.child("values"),
                    "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                )
            ]
        return []
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return [
                invalid(
                    path.child("values"),
                    values,
                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                )
            ]
        return []
    return [invalid(path.child("operator"), operator, "not a valid selector operator")]


def validate_quota_spec(spec: Json) -> ErrorList:
    """``ValidateResourceQuotaSpec``: the hard limits, the scopes and the scope selector."""
    hard = list(spec.get("hard") or {})
    errs = _quota_resources(spec.get("hard"), SPEC.child("hard"))
    return errs + _scopes(spec, hard) + _scope_selector(spec, hard)


def validate_quota(quota: Json, old: Json | None) -> ErrorList:
    """``ValidateResourceQuota`` past the metadata (a create), or ``ValidateResourceQuotaUpdate``
    (the spec again, and the scopes immutable)."""
    spec = quota.get("spec") or {}
    errs = validate_quota_spec(spec)
    if old is None:
        status = quota.get("status") or {}
        return errs + _quota_resources(status.get("hard"), STATUS.child("hard")) + _quota_resources(
            status.get("used"), STATUS.child("used")
        )
    old_scopes = set((old.get("spec") or {}).get("scopes") or [])
    if set(spec.get("scopes") or []) != old_scopes:
        errs.append(invalid(SPEC.child("scopes"), spec.get("scopes"), "field is immutable"))
    return errs


# --- Namespace ------------------------------------------------------------------------------------


def validate_namespace(namespace: Json) -> ErrorList:
    """``ValidateNamespace`` past the metadata: each of ``spec.finalizers`` a qualified name, an
    unqualified one a standard finalizer (all reported at ``spec.finalizers``, as upstream does)."""
    path = SPEC.child("finalizers")
    finalizers = (namespace.get("spec") or {}).get("finalizers") or []
    return [e for name in finalizers for e in finalizer_name_errors(name, path)]


# --- Node -----------------------------------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TAINTS_ANNOTATION = "scheduler.alpha.kubernetes.io/taints"
AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
_CIDR_EXAMPLE = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def _go_taint(taint: Json) -> GoSyntax:
    shown = {
        "Key": taint.get("key", ""),
        "Value": taint.get("value", ""),
        "Effect": taint.get("effect", ""),
        "TimeAdded": taint.get("timeAdded"),
    }
    return GoSyntax(json.dumps(shown, separators=(",", ":")))


def validate_node_taints(taints: Sequence[Json], path: Path) -> ErrorList:
    """``validateNodeTaints``: key, value and effect of each, and no two with one key and effect."""
    errs: ErrorList = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        at = path.index(i)
        key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
        errs += validate_label_name(key, at.child("key"))
        problems = is_label_value(value)
        if problems:
            errs.append(invalid(at.child("value"), value, ";".join(problems)))
        if not effect:
            errs.append(required(at.child("effect")))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(at.child("effect"), effect, TAINT_EFFECTS))
        if (effect, key) in seen:
            found = duplicate(at, _go_taint(taint))
            errs.append(replace(found, detail="taints must be unique by key and effect pair"))
            continue
        seen.add((effect, key))
    return errs


def _json_annotation(annotations: Json, key: str, shape: type) -> tuple[Any, str]:
    """The annotation's JSON if it holds a ``shape``, else why not (draguard's words, see above)."""
    try:
        value = json.loads(annotations[key])
    except json.JSONDecodeError as err:
        return None, f"not valid JSON: {err.msg} (character {err.pos + 1})"
    if not isinstance(value, shape):
        return None, f"must hold a JSON {'list' if shape is list else 'object'}"
    return value, ""


def _field(obj: Any, name: str) -> Any:
    """A field of a JSON object as Go's decoder finds it: the key matched ignoring case."""
    if not isinstance(obj, dict):
        return None
    return next((v for k, v in obj.items() if k.lower() == name.lower()), None)


def _node_annotations(annotations: Json) -> ErrorList:
    """``ValidateNodeSpecificAnnotations``: the deprecated taints and preferAvoidPods annotations."""
    path = META.child("annotations")
    errs: ErrorList = []
    if annotations.get(TAINTS_ANNOTATION):
        taints, why = _json_annotation(annotations, TAINTS_ANNOTATION, list)
        if why:
            errs.append(invalid(path, TAINTS_ANNOTATION, why))
        else:
            entries = [{k: _field(t, k) or "" for k in ("key", "value", "effect")} for t in taints]
            errs += validate_node_taints(entries, path.child(TAINTS_ANNOTATION))
    if annotations.get(AVOID_PODS_ANNOTATION):
        avoids, why = _json_annotation(annotations, AVOID_PODS_ANNOTATION, dict)
        if why:
            return [*errs, invalid(path.child("AvoidPods"), AVOID_PODS_ANNOTATION, why)]
        for i, entry in enumerate(_field(avoids, "preferAvoidPods") or []):
            at = path.child(AVOID_PODS_ANNOTATION).index(i)
            controller = _field(_field(entry, "podSignature"), "podController")
            if controller is None:
                errs.append(required(at.child("PodSignature")))
            elif not _field(controller, "controller"):
                at = at.child("PodSignature", "PodController", "Controller")
                errs.append(invalid(at, False, "must point to a controller"))
    return errs


def _leading_zeros(address: str, length: str) -> bool:
    parts = address.split(".") if ":" not in address else []
    return any(len(p) > 1 and p.startswith("0") for p in [*parts, length])


def cidr_errors(value: str, path: Path) -> ErrorList:
    """``IsValidCIDR`` with 1.36's strict checks (``util/validation/ip.go``)."""
    parsed = parse_cidr_sloppy(value)
    if parsed is None:
        return [invalid(path, value, _CIDR_EXAMPLE)]
    ip, length, written_as_ipv4 = parsed
    address, _, prefix = value.partition("/")
    if _leading_zeros(address, prefix):
        return [invalid(path, value, "must not have leading 0s in IP or prefix length")]
    if not written_as_ipv4 and is_ipv4(ip):
        return [invalid(path, value, "must not have an IPv4-mapped IPv6 address")]
    bits = int.from_bytes(ip[12:] if written_as_ipv4 else ip, "big")
    width = 32 if written_as_ipv4 else 128
    if bits & ((1 << (width - length)) - 1):
        return [invalid(path, value, "must not have bits set beyond the prefix length")]
    return []


def _pod_cidrs(spec: Json) -> list[str]:
    """``spec.podCIDRs`` as the v1-to-internal conversion leaves it: ``podCIDR`` first."""
    cidrs = list(spec.get("podCIDRs") or [])
    single = spec.get("podCIDR") or ""
    if single:
        cidrs[:1] = [single]
    return cidrs


def _validate_pod_cidrs(cidrs: list[str]) -> ErrorList:
    path = SPEC.child("podCIDRs")
    errs: ErrorList = []
    for i, value in enumerate(cidrs):
        errs += cidr_errors(value, path.index(i))
    if len(cidrs) <= 1:
        return errs
    parsed = [parse_cidr_sloppy(c) for c in cidrs]
    broken = next((i for i, p in enumerate(parsed) if p is None), None)
    if broken is not None:
        reason = f"invalid CIDR[{broken}]: <nil> (invalid CIDR address: {cidrs[broken]})"
        errs.append(internal(path, f"invalid PodCIDRs. failed to check with dual stack with error:{reason}"))
    # Two equal CIDRs are of one family, so this refuses them too; kube-apiserver 1.36.2 reports no
    # Duplicate value besides (checked with ["10.0.0.0/24", "10.1.0.0/24", "10.0.0.0/24", ...]).
    families = {is_ipv4(p[0]) for p in parsed if p is not None}  # ::ffff:a.b.c.d is IPv4 to Go
    if broken is not None or families != {True, False} or len(cidrs) > 2:
        errs.append(invalid(path, cidrs, "may specify no more than one CIDR for each IP family"))
    return errs


def _node_resources(status: Json) -> ErrorList:
    """``ValidateNodeResources``: capacity and allocatable (paths ``status.capacity.<name>``)."""
    errs: ErrorList = []
    for section in ("capacity", "allocatable"):
        for name, value in (status.get(section) or {}).items():
            errs += quantity_value_errors(name, Quantity.from_json(value), STATUS.child(section, name))
    return errs


def validate_node(node: Json, old: Json | None) -> ErrorList:
    """``ValidateNode`` past the metadata (a create), or ``ValidateNodeUpdate``."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    errs = _node_annotations((node.get("metadata") or {}).get("annotations") or {})
    taints = validate_node_taints(spec.get("taints") or [], META.child("taints"))
    if old is None:
        return errs + taints + _node_resources(status) + _validate_pod_cidrs(_pod_cidrs(spec))
    errs += _node_resources(status)
    addresses: set[tuple[str, str]] = set()
    for i, address in enumerate(status.get("addresses") or []):
        pair = (address.get("type", ""), address.get("address", ""))
        if pair in addresses:
            errs.append(duplicate(STATUS.child("addresses").index(i), GoSyntax(_go_address(address))))
        addresses.add(pair)
    return errs + _node_spec_update(spec, old.get("spec") or {}) + taints


def _go_address(address: Json) -> str:
    shown = {"Type": address.get("type", ""), "Address": address.get("address", "")}
    return json.dumps(shown, separators=(",", ":"))


def _node_spec_update(spec: Json, old: Json) -> ErrorList:
    """What a Node update may not change: podCIDRs once set, providerID once set, externalID."""
    errs: ErrorList = []
    cidrs, old_cidrs = _pod_cidrs(spec), _pod_cidrs(old)
    message = 'node updates may not change podCIDR except from "" to valid'
    if old_cidrs:
        changed = [a != b for a, b in zip(old_cidrs, cidrs, strict=False)]
        errs += [forbidden(SPEC.child("podCIDRs"), message)] * (
            1 if len(old_cidrs) != len(cidrs) else sum(changed)
        )
    old_provider = old.get("providerID") or ""
    if old_provider and old_provider != (spec.get("providerID") or ""):
        message = 'node updates may not change providerID except from "" to valid'
        errs.append(forbidden(SPEC.child("providerID"), message))
    if (spec.get("externalID") or "") != (old.get("externalID") or ""):
        errs.append(forbidden(SPEC.child("externalID"), "may not be updated"))
    return errs
