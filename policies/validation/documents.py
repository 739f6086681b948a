"""The API server's verdict on read documents (:mod:`policies.reading`), as ``kubectl apply`` of
them all would get it: each object validated as the create (or, given the stored object, the
update) it would be, and a second object of the same kind, namespace and name refused.

An object is judged on what the server would store: a create drops the ``status`` of the kinds
whose registry strategy resets it (ResourceClaim, DeviceTaintRule, Pod, Namespace, ResourceQuota;
a Node keeps its status), so a ``kubectl get -o yaml`` dump is judged by its spec, as the server
judges it. A workload is judged by its own rules and its template's
(:mod:`policies.validation.workloads`). Given the input's PriorityClasses, a pod is first admitted
as the Priority admission plugin admits it (:mod:`policies.priority`; not a pod read back from a
cluster, admitted in its day): its refusal is then the server's whole answer, since admission runs
before the pod's validation; a second default class is refused after the class's own validation,
as the plugin's validating half does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policies.api import core, resource
from policies.api.base import TypedObject
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.scheduling import PriorityClass
from policies.priority import Priorities, PriorityRefused
from policies.reading import Reading
from policies.validation.core import refuse_privileged
from policies.validation.fielderrors import go_quote, render
from policies.validation.validate import validate

# Kinds whose create resets the status (PrepareForCreate in their registry strategy).
_STATUS_RESET_ON_CREATE = (
    resource.ResourceClaim,
    resource.DeviceTaintRule,
    core.Pod,
    core.Namespace,
    core.ResourceQuota,
)

# Kinds whose update keeps the stored status (PrepareForUpdate in their registry strategy: the status
# is written through its own subresource): those above, and Node.
_STATUS_KEPT_ON_UPDATE = (*_STATUS_RESET_ON_CREATE, core.Node)

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


def as_created(obj: TypedObject) -> TypedObject:
    """``obj`` as a create would store it: without the status its strategy drops."""
    if isinstance(obj, _STATUS_RESET_ON_CREATE) and getattr(obj, "status", None) is not None:
        return obj.model_copy(update={"status": None})
    return obj


def as_updated(obj: TypedObject, old: TypedObject) -> TypedObject:
    """``obj`` as an update of ``old`` would store it: with the stored status (where the strategy
    keeps it), generation, creation and deletion times, and the stored uid, resourceVersion and
    grace period where the document has none (upstream
    ``staging/src/k8s.io/apiserver/pkg/registry/rest/update.go``, BeforeUpdate)."""
    meta, stored = obj.metadata, old.metadata
    kept = {
        "generation": stored.generation,
        "creation_timestamp": stored.creation_timestamp,
        "deletion_timestamp": stored.deletion_timestamp,
        "uid": meta.uid or stored.uid,
        "resource_version": meta.resource_version or stored.resource_version,
        "deletion_grace_period_seconds": meta.deletion_grace_period_seconds
        if meta.deletion_grace_period_seconds is not None
        else stored.deletion_grace_period_seconds,
    }
    update: dict[str, object] = {
        "metadata": meta.model_copy(update={k: v for k, v in kept.items() if v is not None})
    }
    if isinstance(obj, _STATUS_KEPT_ON_UPDATE) and "status" in type(obj).model_fields:
        update["status"] = getattr(old, "status", None)
    return obj.model_copy(update=update)


def judge(
    reading: Reading,
    old: TypedObject | None = None,
    namespace_labels: Labels = None,
    *,
    allow_privileged: bool = False,
    priorities: Priorities | None = None,
) -> list[str]:
    """The API server's validation errors for a read document (none when it was not read), as a
    server with its default flags says them (``allow_privileged``: its ``--allow-privileged``);
    ``priorities``: the cluster's PriorityClasses, for the Priority admission plugin's refusals."""
    obj = reading.obj
    if obj is None or reading.errors:
        return []
    refused = _admission(reading, old, priorities)
    if refused is not None:
        return [refused]
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
            as_created(obj) if old is None else as_updated(obj, old),
            old,
            namespace_labels=namespace_labels,
            check_fields=False,
        )
    except Exception as err:  # a bug in draguard: say so on this object, keep checking the others
        return [f"<root>: Internal error: draguard could not validate this object: {err!r}"]
    found = render(errors + privileged)
    if not found and priorities is not None and isinstance(obj, PriorityClass):
        refused = priorities.class_refusal(obj)
        found = [refused] if refused is not None else []
    return found


def template_refusal(reading: Reading, priorities: Priorities) -> list[str]:
    """Why the Priority admission plugin would refuse the pods of a workload's template (the API
    server takes the workload itself: the pods its controller makes are what it refuses)."""
    if reading.template is None or not isinstance(reading.obj, core.Pod):
        return []
    try:
        priorities.admit(reading.obj)
    except PriorityRefused as err:
        return [f"{'.'.join(reading.template)}: its pods would be refused: {err.reason}"]
    return []


def _admission(reading: Reading, old: TypedObject | None, priorities: Priorities | None) -> str | None:
    """The Priority plugin's refusal of a pod's create (a workload's template is no pod yet)."""
    obj = reading.obj
    if priorities is None or old is not None or reading.template is not None or not isinstance(obj, core.Pod):
        return None
    return priorities.refusal(obj)
