"""The API server's verdict on read documents (:mod:`policies.reading`), as ``kubectl apply`` of
them all would get it: each object validated as the create (or, given the stored object, the
update) it would be, and a second object of the same kind, namespace and name refused.

An object is judged on what the server would store: a create drops the ``status`` of the kinds
whose registry strategy resets it (ResourceClaim, DeviceTaintRule, Pod, Namespace, ResourceQuota;
a Node keeps its status), so a ``kubectl get -o yaml`` dump is judged by its spec, as the server
judges it. A workload is judged by its own rules and its template's
(:mod:`policies.validation.workloads`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policies.api import core, resource, schema
from policies.api.base import TypedObject
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.reading import Reading
from policies.validation.core import refuse_privileged
from policies.validation.fielderrors import go_quote, render
from policies.validation.othermeta import validate_other_meta
from policies.validation.validate import validate

# Kinds whose create resets the status (PrepareForCreate in their registry strategy).
_STATUS_RESET_ON_CREATE = (
    resource.ResourceClaim,
    resource.DeviceTaintRule,
    core.Pod,
    core.Namespace,
    core.ResourceQuota,
)

Identity = tuple[str, str, str, str]
# Labels of a namespace: known, or None ("not known": admin access cannot be verified).
Labels = Mapping[str, str] | None
# For inputs that do not describe namespaces at all (allocate's cluster state): the namespace
# check of admin access is not this input's to make.
ANY_NAMESPACE: Mapping[str, str] = {resource.ADMIN_ACCESS_LABEL: "true"}


def identity(reading: Reading) -> Identity | None:
    """(group, kind, namespace, name) of a named object draguard checks; None otherwise (skipped,
    unreadable, or named by the server: ``generateName``)."""
    if reading.skipped is not None or not reading.kind or not reading.name:
        return None
    if reading.obj is not None and reading.template is None and not reading.obj.metadata.name:
        return None
    group = reading.api_version.rpartition("/")[0]
    namespace = (reading.namespace or DEFAULT_NAMESPACE) if reading.namespaced else ""
    return (group, reading.kind, namespace, reading.name)


def duplicates(readings: Sequence[Reading], wheres: Sequence[str]) -> dict[int, str]:
    """For each document naming the same object as an earlier one: the error line (the API server
    answers the second create AlreadyExists)."""
    first: dict[Identity, int] = {}
    found: dict[int, str] = {}
    for i, reading in enumerate(readings):
        key = identity(reading)
        if key is None:
            continue
        if key in first:
            found[i] = (
                f"metadata.name: Duplicate value: {go_quote(reading.name)}: the same {reading.kind} is "
                f"also in {wheres[first[key]]}"
            )
        else:
            first[key] = i
    return found


def _other_kind(reading: Reading) -> list[str]:
    """A document of a kind draguard does not otherwise check: its metadata's problems."""
    if reading.meta is None:
        return []
    namespaced = schema.is_namespaced(reading.api_version, reading.kind)
    return render(validate_other_meta(reading.api_version, reading.kind, reading.meta, namespaced))


def as_created(obj: TypedObject) -> TypedObject:
    """``obj`` as a create would store it: without the status its strategy drops."""
    if isinstance(obj, _STATUS_RESET_ON_CREATE) and getattr(obj, "status", None) is not None:
        return obj.model_copy(update={"status": None})
    return obj


def judge(
    reading: Reading,
    old: TypedObject | None = None,
    namespace_labels: Labels = None,
    *,
    allow_privileged: bool = True,
) -> list[str]:
    """The API server's validation errors for a read document (none when it was not read), as a
    server started the way kubeadm starts it says them (``allow_privileged``: its
    ``--allow-privileged``, which kubeadm sets; False is kube-apiserver's own default)."""
    obj = reading.obj
    if reading.errors:
        return []
    if obj is None:
        return _other_kind(reading)
    privileged = refuse_privileged(obj) if isinstance(obj, core.Pod) and not allow_privileged else []
    if reading.template is not None and reading.workload is not None:
        # Imported where a workload is judged: with the pod validation it brings, it is much of
        # what a small validate of DRA objects would otherwise spend importing.
        from policies.validation.workloads import under, validate_workload

        assert isinstance(obj, core.Pod)
        errors = validate_workload(reading.kind, reading.workload, reading.template, obj)
        return render(errors + [under(reading.template, e) for e in privileged])
    try:
        errors = validate(
            as_created(obj) if old is None else obj,
            old,
            namespace_labels=namespace_labels,
            check_fields=False,
        )
    except Exception as err:  # a bug in draguard: say so on this object, keep checking the others
        return [f"<root>: Internal error: draguard could not validate this object: {err!r}"]
    return render(errors + privileged)
