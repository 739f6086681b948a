"""The metadata of the kinds draguard does not otherwise check, validated as the API server
validates any object's (``ValidateObjectMeta``, ``pkg/apis/core/validation``): the name (and a
generateName) by the kind's rule, the namespace, labels, annotations, finalizers.

Each kind's validation hands ``ValidateObjectMeta`` its own name rule. Most use a DNS subdomain
(``NameIsDNSSubdomain``); Services (``ValidateServiceName``) a DNS label; the kinds whose name is
only ever a path segment (``path.ValidatePathSegmentName``: RBAC's ``ValidateRBACName``,
PodDisruptionBudgets, core Events) only refuse ``.``, ``..``, ``/`` and ``%``. The table was
checked against kube-apiserver 1.36.2 (``tests/kube/test_other_kinds_names.py`` creates every
kind it serves with names each rule refuses). Custom resources get a DNS subdomain, as the
custom-resource handler gives them (``customresource/strategy.go``).

Left out, because their names follow their spec (CustomResourceDefinition: ``plural.group``,
APIService: ``version.group``, IPAddress: an IP address) or because the server never stores
them (the reviews, Binding, ComponentStatus): only the generic part of their rule is checked
(CustomResourceDefinition a DNS subdomain, APIService a path segment), or none. A generateName of
exactly ``.`` or ``..`` passes a path-segment kind's prefix check upstream and is refused here.
"""

from __future__ import annotations

from policies.api.base import ObjectMeta
from policies.validation.fielderrors import ErrorList, Path
from policies.validation.meta import NameCheck, validate_object_meta
from policies.validation.names import is_dns1123_label, is_dns1123_subdomain, is_path_segment_name


def _any_name(_value: str) -> list[str]:
    return []


# (group, kind) -> the kind's name rule, where it is not a DNS subdomain.
_NAME_RULES: dict[tuple[str, str], NameCheck] = {
    ("", "Service"): is_dns1123_label,
    ("", "Event"): is_path_segment_name,
    ("policy", "PodDisruptionBudget"): is_path_segment_name,
    ("rbac.authorization.k8s.io", "Role"): is_path_segment_name,
    ("rbac.authorization.k8s.io", "ClusterRole"): is_path_segment_name,
    ("rbac.authorization.k8s.io", "RoleBinding"): is_path_segment_name,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): is_path_segment_name,
    ("apiregistration.k8s.io", "APIService"): is_path_segment_name,
    ("networking.k8s.io", "IPAddress"): _any_name,
    ("certificates.k8s.io", "CertificateSigningRequest"): _any_name,
    ("authentication.k8s.io", "TokenReview"): _any_name,
    ("authentication.k8s.io", "SelfSubjectReview"): _any_name,
    ("authorization.k8s.io", "SubjectAccessReview"): _any_name,
    ("authorization.k8s.io", "SelfSubjectAccessReview"): _any_name,
    ("authorization.k8s.io", "LocalSubjectAccessReview"): _any_name,
    ("authorization.k8s.io", "SelfSubjectRulesReview"): _any_name,
    ("", "Binding"): _any_name,
    ("", "ComponentStatus"): _any_name,
}


def name_rule(api_version: str, kind: str) -> NameCheck:
    """The rule ``kind``'s validation checks its name (and generateName) with."""
    return _NAME_RULES.get((api_version.rpartition("/")[0], kind), is_dns1123_subdomain)


def validate_other_meta(api_version: str, kind: str, meta: ObjectMeta, namespaced: bool | None) -> ErrorList:
    """``metadata`` of an object of a kind draguard does not otherwise check, as its create is
    validated; ``namespaced`` None (a custom resource without its definition) checks a namespace
    only where one is written."""
    scoped = bool(meta.namespace) if namespaced is None else namespaced
    return validate_object_meta(meta, scoped, Path("metadata"), name_rule(api_version, kind))
