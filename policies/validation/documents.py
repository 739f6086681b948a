"""The API server's verdict on read documents (:mod:`policies.reading`), two ways:

* **new** (:func:`judge`, ``draguard validate``): each object validated as the create ``kubectl
  apply`` would make (or, given the stored object, the update);
* **existing** (:func:`judge_existing`, the commands that read a cluster as it stands:
  ``allocate``, ``audit``, a test suite's ``state:``, ``serve --state``): the cluster already holds
  the object, the API server validated it once, perhaps under another version, and
  kube-scheduler evaluates it as it is. What validation says of it is only ever a warning, in two
  parts: what the API server refuses even in an update that leaves the object as it is (its
  update validation, with validation ratcheting: ``pkg/apis/resource/validation/validation.go``
  treats an unchanged class selector as *stored*, compiled in the stored-expressions environment,
  and never validates a claim's or a template's immutable spec again), and what only a create
  would refuse, which a stored object keeps.

For a selector refused on create, :func:`selector_notes` says whether an object already stored
with it keeps working: the scheduler compiles stored selectors in the stored-expressions
environment (``k8s.io/apiserver/pkg/cel/environment``, ``StoredExpressions``: every function and
field, whatever the feature gates), where the API server's create uses the new-expressions one.
Both were checked against kube-apiserver 1.36.2 with objects written into its etcd
(``tests/kube/test_stored_objects.py``).

A create is judged on what the server would store: it drops the ``status`` of the kinds whose
registry strategy resets it (ResourceClaim, DeviceTaintRule, Pod, Namespace, ResourceQuota; a Node
keeps its status), so a ``kubectl get -o yaml`` dump is judged by its spec, as the server judges
it. A workload is judged by its own rules and its template's
(:mod:`policies.validation.workloads`; its update is judged as its create), a document of a kind
draguard does not otherwise check by its metadata (:mod:`policies.validation.othermeta`).

Given the input's PriorityClasses, a pod as written is first admitted as the Priority admission
plugin admits it (:mod:`policies.priority`; a pod read back from a cluster was admitted in its day
and is not refused again): its refusal is then the server's whole answer, since admission runs
before the pod's validation, and it is a refusal in every command (:func:`admission_refusals`):
the cluster cannot hold a pod it would not admit. A second default class is refused after the
class's own validation, as the plugin's validating half does; a cluster that holds one (only a race
leaves one) is warned of it.

The same object in two documents is :func:`duplicates`' to find: ``kubectl apply`` of both applies
the second as an update of the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.api import core, resource, schema
from policies.api.base import TypedObject
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.scheduling import PriorityClass
from policies.priority import Priorities, PriorityRefused
from policies.reading import Reading
from policies.validation.cel import stored_selector_note
from policies.validation.core import refuse_privileged
from policies.validation.fielderrors import ErrorList, Path, internal, render
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

# Kinds whose update keeps the stored status (PrepareForUpdate in their registry strategy: the status
# is written through its own subresource): those above, and Node.
_STATUS_KEPT_ON_UPDATE = (*_STATUS_RESET_ON_CREATE, core.Node)

Identity = tuple[str, str, str, str]
# Labels of a namespace: known, or None ("not known": admin access cannot be verified).
Labels = Mapping[str, str] | None
# For inputs that do not describe namespaces at all (allocate's cluster state): the namespace
# check of admin access is not this input's to make.
ANY_NAMESPACE: Mapping[str, str] = {resource.ADMIN_ACCESS_LABEL: "true"}

# What a warning about an existing object says about where it comes from.
EVEN_AS_STORED = "even as stored: the API server refuses every update that leaves it so"
ON_CREATE_ONLY = "on create only: the API server lets an object it already holds keep it"


def identity(reading: Reading) -> Identity | None:
    """(group, kind, namespace, name) of a named object draguard reads; None otherwise (skipped
    whole, unreadable, or named by the server: ``generateName``)."""
    if (reading.skipped is not None and not reading.metadata_only) or not reading.kind or not reading.name:
        return None
    if reading.obj is not None and reading.template is None and not reading.obj.metadata.name:
        return None
    group = reading.api_version.rpartition("/")[0]
    namespaced = schema.is_namespaced(reading.api_version, reading.kind)
    namespace = reading.namespace if namespaced is None else (reading.namespace or DEFAULT_NAMESPACE)
    return (group, reading.kind, namespace if namespaced is not False else "", reading.name)


def duplicates(readings: Sequence[Reading]) -> dict[int, int]:
    """For each document naming the same object as an earlier one, the index of the last earlier
    one (the object that ``kubectl apply`` of both would update with it)."""
    last: dict[Identity, int] = {}
    found: dict[int, int] = {}
    for i, reading in enumerate(readings):
        key = identity(reading)
        if key is None:
            continue
        if key in last:
            found[i] = last[key]
        last[key] = i
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


def _errors(
    reading: Reading, old: TypedObject | None, labels: Labels, allow_privileged: bool, unchanged: bool = False
) -> ErrorList:
    """The validation errors of a read document as a create (``old`` None), an update of ``old``,
    or an update that leaves it ``unchanged``."""
    obj = reading.obj
    if reading.errors:
        return []
    old = obj if unchanged else old
    if obj is None:
        if reading.meta is None:
            return []
        # Most kinds' update validation runs their create validation again (ValidateConfigMapUpdate,
        # ValidateServiceUpdate, ValidateRoleUpdate...): the metadata is judged the same either way.
        namespaced = schema.is_namespaced(reading.api_version, reading.kind)
        return validate_other_meta(reading.api_version, reading.kind, reading.meta, namespaced)
    privileged = refuse_privileged(obj) if isinstance(obj, core.Pod) and not allow_privileged else []
    if reading.template is not None and reading.workload is not None:
        # Imported where a workload is judged: with the pod validation it brings, it is much of
        # what a small validate of DRA objects would otherwise spend importing.
        from policies.validation.workloads import under, validate_workload

        assert isinstance(obj, core.Pod)
        errors = validate_workload(reading.kind, reading.workload, reading.template, obj)
        return errors + [under(reading.template, e) for e in privileged]
    try:
        errors = validate(
            as_created(obj) if old is None else as_updated(obj, old),
            old,
            namespace_labels=labels,
            check_fields=False,
        )
    except Exception as err:  # a bug in draguard: say so on this object, keep checking the others
        return [internal(Path("<root>"), f"draguard could not validate this object: {err!r}")]
    return errors + privileged


def judge(
    reading: Reading,
    old: TypedObject | None = None,
    namespace_labels: Labels = None,
    *,
    allow_privileged: bool = True,
    priorities: Priorities | None = None,
) -> list[str]:
    """The API server's validation errors for a read document (none when it was not read), as a
    server started the way kubeadm starts it says them (``allow_privileged``: its
    ``--allow-privileged``, which kubeadm sets; False is kube-apiserver's own default);
    ``priorities``: the cluster's PriorityClasses, for the Priority admission plugin's refusals."""
    refused = _admission(reading, old, priorities)
    if refused is not None:
        return [refused]
    found = render(_errors(reading, old, namespace_labels, allow_privileged))
    if not found:
        found = _class_refusal(reading, priorities)
    return found


def admission_refusals(reading: Reading, priorities: Priorities) -> list[str]:
    """What the Priority admission plugin refuses of a document describing a cluster: a pod as
    written (one already admitted keeps what it was given). The commands that read a cluster refuse
    it too, unlike what validation says (:func:`judge_existing`): the cluster cannot hold a pod the
    API server would not admit."""
    refused = _admission(reading, None, priorities)
    return [] if refused is None else [refused]


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
    if priorities is None or old is not None or reading.errors or reading.template is not None:
        return None
    return priorities.refusal(obj) if isinstance(obj, core.Pod) else None


def _class_refusal(reading: Reading, priorities: Priorities | None) -> list[str]:
    """The plugin's refusal of a second default PriorityClass."""
    if priorities is None or not isinstance(reading.obj, PriorityClass):
        return []
    refused = priorities.class_refusal(reading.obj)
    return [] if refused is None else [refused]


def selector_notes(reading: Reading, errors: Sequence[str]) -> list[str]:
    """For each selector among ``errors`` (a create's): whether an object the cluster already
    holds with it keeps working (:func:`policies.validation.cel.stored_selector_note`)."""
    if reading.obj is None or not isinstance(reading.obj, _WITH_SELECTORS):
        return []
    document = reading.obj.to_json()
    notes = []
    for path in dict.fromkeys(e.split(": ", 1)[0] for e in errors):
        expression = _value_at(document, path) if path.endswith(".cel.expression") else None
        if isinstance(expression, str):
            notes.append(f"{path}: {stored_selector_note(reading.kind, expression)}")
    return notes


_WITH_SELECTORS = (resource.DeviceClass, resource.ResourceClaim, resource.ResourceClaimTemplate)


def _value_at(document: Any, path: str) -> Any:
    """The value at a field path (``spec.selectors[0].cel.expression``) of a JSON document."""
    value = document
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            index = int(part.strip("[]"))
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def judge_existing(
    reading: Reading, *, allow_privileged: bool = True, priorities: Priorities | None = None
) -> list[str]:
    """What validation says of a document that describes an object the cluster already holds:
    warnings, never refusals. First what even an update leaving the object as it is would be
    refused for, then what only a create would refuse (``priorities``: the cluster's classes, for
    a second default class). Nothing of a pod the Priority plugin refuses: that refusal is the
    server's whole answer (:func:`admission_refusals`). Whether a namespace may use admin access is
    for the cluster to say, not these documents."""
    if _admission(reading, None, priorities) is not None:
        return []
    created = judge(reading, None, ANY_NAMESPACE, allow_privileged=allow_privileged)
    if not created and not _status_checked_on_update(reading.obj):
        # What an unchanged update checks, a create checks too (but for these statuses).
        return [_said(line, ON_CREATE_ONLY) for line in _class_refusal(reading, priorities)]
    stored = render(_errors(reading, None, ANY_NAMESPACE, allow_privileged, unchanged=True))
    notes = dict(note.split(": ", 1) for note in selector_notes(reading, created))
    warnings = [_said(line, EVEN_AS_STORED) for line in stored]
    for line in created:
        if line not in stored:
            note = notes.get(line.split(": ", 1)[0])
            warnings.append(_said(line, f"{ON_CREATE_ONLY}; {note}" if note else ON_CREATE_ONLY))
    return warnings


def _status_checked_on_update(obj: TypedObject | None) -> bool:
    """A claim's or a DeviceTaintRule's status: a create drops it, an update validates it."""
    if not isinstance(obj, (resource.ResourceClaim, resource.DeviceTaintRule)):
        return False
    return obj.status is not None


def _said(line: str, why: str) -> str:
    """``line`` with ``why`` in brackets at the end of its first line (a CEL error goes on with
    the expression and a caret)."""
    first, newline, rest = line.partition("\n")
    return f"{first} ({why}){newline}{rest}"
