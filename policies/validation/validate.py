"""``validate(obj, old)``: everything the API server would say about a create or an update.

The object is defaulted first (``policies.api.defaults``), as the API server does before it
validates: a request written with ``count: 0`` is checked as ``count: 1``. Without ``old`` the
object is checked as a create; a status that a create would discard is checked as if written by
the first status update, so ``kubectl get -o yaml`` output can be validated whole. With ``old`` it
is an update: immutable fields are compared and values left unchanged are not re-checked where
upstream does not re-check them.

The admin-access rule lives in the API server's registry strategy rather than its validation
functions, but it rejects the request all the same, so it is part of this answer: a claim or
template asking for ``adminAccess: true`` needs the ``resource.kubernetes.io/admin-access: "true"``
label on its namespace. ``namespace_labels`` are that namespace's labels; None means "not known",
which (like an API server that cannot read the namespace) yields an internal error for such
requests and nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from policies.api import core, resource, scheduling
from policies.api.base import TypedObject
from policies.api.defaults import apply_defaults
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.validation import corekinds, gosyntax
from policies.validation.claims import validate_claim_spec, validate_claim_status
from policies.validation.core import validate_pod_claims
from policies.validation.fielderrors import ErrorList, Path, forbidden, internal, invalid
from policies.validation.meta import (
    validate_object_meta,
    validate_object_meta_update,
    validate_template_object_meta,
)
from policies.validation.names import is_dns1123_label, is_dns1123_subdomain
from policies.validation.resource import (
    immutable,
    validate_class_spec,
    validate_taint_rule_spec,
    validate_taint_rule_status,
)
from policies.validation.scheduling import validate_priority_class, validate_priority_class_update
from policies.validation.slices import validate_slice_spec
from policies.validation.unknown import unknown_fields

# Validation does not depend on the time; defaulting needs one (a taint's timeAdded).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

META = Path("metadata")
SPEC = Path("spec")
STATUS = Path("status")

Labels = Mapping[str, str] | None
Validator = Callable[[TypedObject, TypedObject | None, Labels], ErrorList]


def validate(
    obj: TypedObject,
    old: TypedObject | None = None,
    *,
    namespace_labels: Labels = None,
    now: datetime = EPOCH,
    check_fields: bool = True,
) -> ErrorList:
    """All problems with ``obj`` (an update of ``old`` if given), as kubectl would print them.
    Unknown fields are the ones draguard's models do not know (they know the 1.37 shapes some
    clusters serve); ``check_fields=False`` leaves them out, for a caller that decoded ``obj``
    strictly from its document against the 1.36 API server's fields already
    (:mod:`policies.validation.strict`)."""
    obj = apply_defaults(obj, now)
    if old is not None:
        if type(old) is not type(obj):
            return [
                invalid(Path("kind"), obj.kind or "", f"must be the same kind as the old object ({old.kind})")
            ]
        old = apply_defaults(old, now)
    resource_kind = bool(obj.api_version and obj.api_version.startswith(resource.GROUP + "/"))
    errs = unknown_fields(obj) if check_fields and resource_kind else []
    validator = _VALIDATORS.get(type(obj))
    return errs + validator(obj, old, namespace_labels) if validator is not None else errs


# The start of the error when the namespace's labels are not known (callers that can supply
# them, like the CLI's --namespace-labels, recognise it by this).
NAMESPACE_UNKNOWN = "could not retrieve namespace to verify admin access"


def _admin_denied(path: Path, namespace: str, labels: Labels) -> ErrorList:
    """The registry strategy's namespace check for ``adminAccess: true``."""
    if labels is None:
        return [internal(path, f'{NAMESPACE_UNKNOWN}: labels of namespace "{namespace}" are not known')]
    if labels.get(resource.ADMIN_ACCESS_LABEL) != "true":
        return [
            forbidden(
                path,
                f"admin access to devices requires the `{resource.ADMIN_ACCESS_LABEL}: true` "
                "label on the containing namespace",
            )
        ]
    return []


def _admin_requests(spec: resource.ResourceClaimSpec, namespace: str, labels: Labels) -> ErrorList:
    # The registry strategy names the request's own path, without "exactly" (the field's v1beta1
    # place), and "spec.devices..." for templates too (the same helper serves both); checked
    # against kube-apiserver 1.36.2.
    for i, req in enumerate(spec.devices.requests or []):
        if req.exactly is not None and req.exactly.admin_access:
            path = SPEC.child("devices", "requests").index(i).child("adminAccess")
            return _admin_denied(path, namespace, labels)
    return []


def _admin_results(
    claim: resource.ResourceClaim, old: resource.ResourceClaim | None, labels: Labels
) -> ErrorList:
    """Only a newly written allocation is checked; a stored one cannot change."""
    if old is not None and _admin_result_index(old) is not None:
        return []
    index = _admin_result_index(claim)
    if index is None:
        return []
    path = STATUS.child("allocation", "devices", "results").index(index).child("adminAccess")
    return _admin_denied(path, claim.namespace or DEFAULT_NAMESPACE, labels)


def _admin_result_index(claim: resource.ResourceClaim) -> int | None:
    allocation = claim.status.allocation if claim.status is not None else None
    results = (
        allocation.devices.results if allocation is not None and allocation.devices is not None else None
    )
    for i, result in enumerate(results or []):
        if result.admin_access:
            return i
    return None


def _meta(
    obj: TypedObject,
    old: TypedObject | None,
    namespaced: bool,
    name_check: Callable[[str], list[str]] = is_dns1123_subdomain,
    *,
    recheck_on_update: bool = True,
) -> ErrorList:
    """Create: ``ValidateObjectMeta``. Update: ``ValidateObjectMetaUpdate``, after the create checks
    where upstream repeats them (claims, classes) and alone where it does not
    (``recheck_on_update=False``: templates, slices, DeviceTaintRules, the core kinds)."""
    if old is None:
        return validate_object_meta(obj.metadata, namespaced, META, name_check)
    errs = validate_object_meta(obj.metadata, namespaced, META, name_check) if recheck_on_update else []
    return errs + validate_object_meta_update(obj.metadata, old.metadata, META)


def _has_status(claim: resource.ResourceClaim) -> bool:
    return claim.status is not None and bool(claim.status.to_json())


def _claim(obj: TypedObject, old: TypedObject | None, labels: Labels) -> ErrorList:
    assert isinstance(obj, resource.ResourceClaim)
    assert old is None or isinstance(old, resource.ResourceClaim)
    if old is None:
        errs = _admin_requests(obj.spec, obj.namespace or DEFAULT_NAMESPACE, labels)
        errs += _meta(obj, None, True)
        errs += validate_claim_spec(obj.spec, SPEC)
        if _has_status(obj):
            errs += _admin_results(obj, None, labels)
            errs += validate_claim_status(obj, None, STATUS)
        return errs
    errs = _meta(obj, old, True)
    errs += immutable(obj.spec, old.spec, SPEC, lambda: gosyntax.claim_spec(obj.spec))
    errs += _admin_results(obj, old, labels)
    errs += validate_claim_status(obj, old.status, STATUS)
    return errs


def _template(obj: TypedObject, old: TypedObject | None, labels: Labels) -> ErrorList:
    assert isinstance(obj, resource.ResourceClaimTemplate)
    assert old is None or isinstance(old, resource.ResourceClaimTemplate)
    if old is not None:
        # ValidateResourceClaimTemplateUpdate (1.36): the spec is immutable, and validated again as
        # "stored" (CEL in the stored-expressions environment, opaque parameters of any length);
        # checked against kube-apiserver 1.36.2 by tests/kube/test_stored_objects.py.
        errs = _meta(obj, old, True, recheck_on_update=False)
        errs += immutable(obj.spec, old.spec, SPEC, lambda: gosyntax.template_spec(obj.spec))
        errs += validate_template_object_meta(obj.spec.metadata, SPEC.child("metadata"))
        return errs + validate_claim_spec(obj.spec.spec, SPEC.child("spec"), stored=True)
    errs = _admin_requests(obj.spec.spec, obj.namespace or DEFAULT_NAMESPACE, labels)
    errs += _meta(obj, None, True)
    errs += validate_template_object_meta(obj.spec.metadata, SPEC.child("metadata"))
    errs += validate_claim_spec(obj.spec.spec, SPEC.child("spec"))
    return errs


def _device_class(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    assert isinstance(obj, resource.DeviceClass)
    assert old is None or isinstance(old, resource.DeviceClass)
    return _meta(obj, old, False) + validate_class_spec(obj.spec, old.spec if old is not None else None, SPEC)


def _resource_slice(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    assert isinstance(obj, resource.ResourceSlice)
    assert old is None or isinstance(old, resource.ResourceSlice)
    errs = _meta(obj, old, False, recheck_on_update=False)
    return errs + validate_slice_spec(obj.spec, old.spec if old is not None else None, SPEC)


def _taint_rule(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    assert isinstance(obj, resource.DeviceTaintRule)
    assert old is None or isinstance(old, resource.DeviceTaintRule)
    errs = _meta(obj, old, False, recheck_on_update=False)
    errs += validate_taint_rule_spec(obj.spec, old.spec if old is not None else None, SPEC)
    errs += validate_taint_rule_status(obj.status, STATUS)
    return errs


# Core kinds: ValidatePodUpdate, ValidateNodeUpdate, ValidateNamespaceUpdate and
# ValidateResourceQuotaUpdate check metadata with ValidateObjectMetaUpdate only; the rest of a
# Node, Namespace or ResourceQuota is policies.validation.corekinds'.


def _pod(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    # Imported where a pod is judged: ValidatePodSpec's port is much of what a small validate of
    # DRA objects would otherwise spend importing.
    from policies.validation.podspec import validate_pod_spec

    assert isinstance(obj, core.Pod)
    errs = _meta(obj, old, True, recheck_on_update=False)
    spec = obj.spec.to_json()
    return errs + validate_pod_spec(spec, SPEC, pod_name=obj.name, is_pod=True) + validate_pod_claims(obj)


def _priority_class(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    assert isinstance(obj, scheduling.PriorityClass)
    assert old is None or isinstance(old, scheduling.PriorityClass)
    errs = _meta(obj, old, False, recheck_on_update=False)
    return errs + (validate_priority_class(obj) if old is None else validate_priority_class_update(obj, old))


def _namespace(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    errs = _meta(obj, old, False, is_dns1123_label, recheck_on_update=False)
    return errs + (corekinds.validate_namespace(obj.to_json()) if old is None else [])


def _node(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    errs = _meta(obj, old, False, recheck_on_update=False)
    return errs + corekinds.validate_node(obj.to_json(), old.to_json() if old is not None else None)


def _quota(obj: TypedObject, old: TypedObject | None, _labels: Labels) -> ErrorList:
    errs = _meta(obj, old, True, recheck_on_update=False)
    return errs + corekinds.validate_quota(obj.to_json(), old.to_json() if old is not None else None)


_VALIDATORS: dict[type[TypedObject], Validator] = {
    resource.DeviceClass: _device_class,
    resource.ResourceClaim: _claim,
    resource.ResourceClaimTemplate: _template,
    resource.ResourceSlice: _resource_slice,
    resource.DeviceTaintRule: _taint_rule,
    core.Pod: _pod,
    core.Node: _node,
    core.Namespace: _namespace,
    core.ResourceQuota: _quota,
    scheduling.PriorityClass: _priority_class,
}
