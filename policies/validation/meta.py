"""``metadata`` checks shared by every kind (``pkg/apis/core/validation`` ``ValidateObjectMeta``).

Offline input differs from what the API server validates in one respect: manifests do not carry the
fields the server fills in (uid, resourceVersion, creationTimestamp), and a namespace may come from
the kubectl context rather than the file. So a missing namespace is not an error here, a
cluster-scoped object's namespace is ignored (the server clears it), and on update only the
fields a manifest controls (name, namespace) are compared with the old object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policies.api.base import ObjectMeta
from policies.validation.fielderrors import ErrorList, Path, forbidden, go_quote, invalid, required, too_long
from policies.validation.gosyntax import GoSyntax, slice_of
from policies.validation.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    validate_label_name,
)

NameCheck = Callable[[str], list[str]]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
IS_NEGATIVE_ERROR = "must be greater than or equal to 0"
IMMUTABLE = "field is immutable"

# ResourceClaimTemplate.spec.metadata may only carry these (corevalidation.ValidateTemplateObjectMeta).
_TEMPLATE_META_ALLOWED = {"labels", "annotations"}


def _prefix_name(name: str) -> str:
    """A generateName may end with "-": check it as if a generated suffix followed.

    apimachinery's ``maskTrailingDash`` drops the last *two* characters before appending "a" (an
    upstream quirk: the character before the dash goes unchecked), and the port keeps it so the
    same prefixes pass.
    """
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def validate_labels(labels: Mapping[str, str] | None, path: Path) -> ErrorList:
    errs: ErrorList = []
    for key, value in (labels or {}).items():
        errs += validate_label_name(key, path)
        errs += [invalid(path, value, msg) for msg in is_label_value(value)]
    return errs


def validate_annotations(annotations: Mapping[str, str] | None, path: Path) -> ErrorList:
    """Keys are qualified names compared case-insensitively; all of them together at most 256 KiB."""
    annotations = annotations or {}
    errs: ErrorList = []
    for key in annotations:
        errs += [invalid(path, key, msg) for msg in is_label_key(key.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def validate_object_meta(
    meta: ObjectMeta, namespaced: bool, path: Path, name_check: NameCheck = is_dns1123_subdomain
) -> ErrorList:
    errs: ErrorList = []
    if meta.generate_name:
        errs += [
            invalid(path.child("generateName"), meta.generate_name, msg)
            for msg in name_check(_prefix_name(meta.generate_name))
        ]
    if meta.name:
        errs += [invalid(path.child("name"), meta.name, msg) for msg in name_check(meta.name)]
    elif not meta.generate_name:
        errs.append(required(path.child("name"), "name or generateName is required"))
    if namespaced and meta.namespace:
        errs += [
            invalid(path.child("namespace"), meta.namespace, msg) for msg in is_dns1123_label(meta.namespace)
        ]
    if meta.generation is not None and meta.generation < 0:
        errs.append(invalid(path.child("generation"), meta.generation, IS_NEGATIVE_ERROR))
    errs += validate_labels(meta.labels, path.child("labels"))
    errs += validate_annotations(meta.annotations, path.child("annotations"))
    errs += _validate_finalizers(meta.finalizers or [], path.child("finalizers"))
    return errs


# metav1.FinalizerOrphanDependents, FinalizerDeleteDependents, and core's FinalizerKubernetes.
_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"
_STANDARD_FINALIZERS = frozenset({"kubernetes", _ORPHAN, _FOREGROUND})


def _validate_finalizers(finalizers: list[str], path: Path) -> ErrorList:
    """apimachinery ``ValidateFinalizers`` (qualified names, reported without an index, and the
    orphan/foregroundDeletion conflict), then core's ``validateKubeFinalizerName`` per index."""
    errs: ErrorList = [invalid(path, f, msg) for f in finalizers for msg in is_label_key(f)]
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        shown = GoSyntax(slice_of("string", [go_quote(f) for f in finalizers]))
        errs.append(invalid(path, shown, f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set"))
    for i, name in enumerate(finalizers):
        errs += finalizer_name_errors(name, path.index(i))
    return errs


def finalizer_name_errors(name: str, path: Path) -> ErrorList:
    """core's ``validateFinalizerName``: a qualified name, and an unqualified one a standard
    finalizer (metadata's finalizers, a Namespace's ``spec.finalizers``)."""
    errs = [invalid(path, name, msg) for msg in is_label_key(name)]
    if "/" not in name and name not in _STANDARD_FINALIZERS:
        errs.append(
            invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")
        )
    return errs


def validate_object_meta_update(meta: ObjectMeta, old: ObjectMeta, path: Path) -> ErrorList:
    """``ValidateObjectMetaUpdate``: generation cannot go down, name and namespace cannot change,
    and labels and annotations are checked again (in that order)."""
    errs: ErrorList = []
    if (meta.generation or 0) < (old.generation or 0):
        errs.append(invalid(path.child("generation"), meta.generation or 0, "must not be decremented"))
    for name in ("name", "namespace"):
        new_value, old_value = getattr(meta, name) or "", getattr(old, name) or ""
        if new_value != old_value:
            errs.append(invalid(path.child(name), new_value, IMMUTABLE))
    errs += validate_labels(meta.labels, path.child("labels"))
    errs += validate_annotations(meta.annotations, path.child("annotations"))
    return errs


# Go's zero value of each ObjectMeta field: "" and 0 for the plain strings and generation; for the
# pointers (deletionTimestamp, deletionGracePeriodSeconds), the lists and the maps only nil is zero,
# so an explicit 0 or [] counts as set (reflect.DeepEqual against the zero value).
_ZERO_WHEN_EMPTY = {
    "name",
    "generate_name",
    "namespace",
    "self_link",
    "uid",
    "resource_version",
    "generation",
}


def _is_zero(field: str, value: object) -> bool:
    if value is None:
        return True
    return field in _ZERO_WHEN_EMPTY and value in ("", 0)


def _go_field_path(json_name: str) -> str:
    """validateFieldAllowList names a field by its Go name with the first letter lowered: UID is "uID"."""
    return "uID" if json_name == "uid" else json_name


def validate_template_object_meta(meta: ObjectMeta | None, path: Path) -> ErrorList:
    """Only labels and annotations may be set; every other field is "Forbidden: cannot be set".

    corevalidation.ValidateTemplateObjectMeta: annotations, labels, then the other fields in Go order.
    """
    if meta is None:
        return []
    errs = validate_annotations(meta.annotations, path.child("annotations"))
    errs += validate_labels(meta.labels, path.child("labels"))
    for name, info in type(meta).model_fields.items():
        json_name = info.alias or name
        if json_name not in _TEMPLATE_META_ALLOWED and not _is_zero(name, getattr(meta, name)):
            errs.append(forbidden(path.child(_go_field_path(json_name)), "cannot be set"))
    return errs


_SELECTOR_OPS_WITH_VALUES = ("In", "NotIn")
_SELECTOR_OPS_WITHOUT_VALUES = ("Exists", "DoesNotExist")


def validate_label_selector(selector: Mapping[str, Any] | None, path: Path) -> ErrorList:
    """metav1validation.ValidateLabelSelector of a selector's JSON (invalid values not allowed)."""
    if selector is None:
        return []
    errs = validate_labels(selector.get("matchLabels"), path.child("matchLabels"))
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        at = path.child("matchExpressions").index(i)
        operator, values = expr.get("operator") or "", expr.get("values") or []
        if operator in _SELECTOR_OPS_WITH_VALUES and not values:
            errs.append(required(at.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in _SELECTOR_OPS_WITHOUT_VALUES and values:
            errs.append(
                forbidden(
                    at.child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
        elif operator not in _SELECTOR_OPS_WITH_VALUES + _SELECTOR_OPS_WITHOUT_VALUES:
            errs.append(invalid(at.child("operator"), operator, "not a valid selector operator"))
        errs += validate_label_name(expr.get("key") or "", at.child("key"))
        for j, value in enumerate(values):
            errs += [invalid(at.child("values").index(j), value, msg) for msg in is_label_value(value)]
    return errs
