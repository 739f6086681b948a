"""One way to turn "operation, object, old object, who" into the rule engine's :class:`Request`.

The webhook gets these pieces from an AdmissionReview, the policy test CLI from a suite file and the
audit command from objects that already exist; all three build their request here, so a rule sees
the same request whichever way it is asked.

``Request.group``/``version`` are the *resource's* (what rules compare together with ``resource``):
an eviction is ``pods`` in group ``""`` with subresource ``eviction``, although the object sent is a
``policy/v1`` Eviction. When the caller does not give the kind or the resource, they are derived
from the object the way the API server names them (``Pod`` -> ``pods``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.api.admission import GroupVersionKind, GroupVersionResource, UserInfo
from policies.api.base import TypedObject
from policies.api.kinds import KINDS, DecodeError, decode_as, under
from policies.rules.engine import Request

EVICTION = "eviction"
# The resource an eviction is made on (a subresource of pods), whatever object carries it.
EVICTION_RESOURCE = GroupVersionResource(group="", version="v1", resource="pods")

# Plural resource names of the kinds draguard models (upstream: the API server's REST mappings).
RESOURCES: Mapping[str, str] = {
    "DeviceClass": "deviceclasses",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceSlice": "resourceslices",
    "DeviceTaintRule": "devicetaintrules",
    "Pod": "pods",
    "Node": "nodes",
    "Namespace": "namespaces",
    "ResourceQuota": "resourcequotas",
    "PriorityClass": "priorityclasses",
}


class RequestError(ValueError):
    """The pieces do not make a request (no object at all, an unknown kind and no resource)."""


class UndecodableObject(ValueError):
    """The request is well formed but its object is not a valid object of the request's kind.

    ``problems`` are ``object.spec.x: message`` lines: paths inside the request, so a person can
    tell the object from the old object.
    """

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _kind_of(shown: Mapping[str, Any]) -> GroupVersionKind:
    api_version, kind = shown.get("apiVersion"), shown.get("kind")
    if not isinstance(kind, str) or not kind:
        raise RequestError("kind: Required value: the object has no kind and none was given")
    if not isinstance(api_version, str) or not api_version:
        raise RequestError("apiVersion: Required value: the object has no apiVersion and none was given")
    group, version = _split(api_version)
    return GroupVersionKind(group=group, version=version, kind=kind)


def _resource_of(kind: GroupVersionKind, sub_resource: str) -> GroupVersionResource:
    if sub_resource == EVICTION:
        return EVICTION_RESOURCE
    plural = RESOURCES.get(kind.kind)
    if plural is None:
        raise RequestError(
            f"resource: cannot tell which resource a {kind.kind} is written to: give the resource"
        )
    return GroupVersionResource(group=kind.group, version=kind.version, resource=plural)


def _decode(raw: Any, api_version: str, kind: str, field: str) -> TypedObject | None:
    """The object as a model of the request's kind (one of :data:`KINDS`); ``None`` when absent
    (``object`` of a DELETE)."""
    if raw is None:
        return None
    if isinstance(raw, Mapping) and (raw.get("apiVersion"), raw.get("kind")) != (api_version, kind):
        got = f"{raw.get('apiVersion')} {raw.get('kind')}"
        raise UndecodableObject(
            (f"{field}: Invalid value: {got!r}: the request is for {api_version} {kind}, "
             "and the object is not",)
        )
    try:
        return decode_as(KINDS[(api_version, kind)], raw)
    except DecodeError as err:
        raise UndecodableObject(tuple(under(field, p) for p in err.problems)) from None


def _meta(shown: Any, key: str) -> str:
    meta = shown.get("metadata") if isinstance(shown, Mapping) else None
    value = meta.get(key) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def request_from(
    operation: str,
    raw_object: Any,
    raw_old: Any,
    *,
    kind: GroupVersionKind | None = None,
    resource: GroupVersionResource | None = None,
    sub_resource: str = "",
    namespace: str | None = None,
    name: str | None = None,
    user: UserInfo | None = None,
    uid: str = "",
    dry_run: bool = False,
) -> Request:
    """The rule engine's view of one write.

    ``raw_object``/``raw_old`` are JSON as the API server sends them (``raw_object`` is None on
    DELETE). ``kind``, ``resource``, ``namespace`` and ``name`` default to what the object says.
    Objects of a kind draguard models are decoded; others (an Eviction) are passed raw only.
    Raises :class:`RequestError` when the request cannot be formed and :class:`UndecodableObject`
    when an object is not a valid object of its kind.
    """
    shown = raw_object if raw_object is not None else raw_old
    if kind is None:
        if not isinstance(shown, Mapping):
            raise RequestError("object: Required value: neither an object nor an old object to tell the kind")
        kind = _kind_of(shown)
    if resource is None:
        resource = _resource_of(kind, sub_resource)
    api_version = _api_version(kind.group, kind.version)
    modelled = (api_version, kind.kind) in KINDS
    obj = _decode(raw_object, api_version, kind.kind, "object") if modelled else None
    old = _decode(raw_old, api_version, kind.kind, "oldObject") if modelled else None
    return Request(
        uid=uid,
        operation=operation,
        group=resource.group,
        version=resource.version,
        kind=kind.kind,
        resource=resource.resource,
        sub_resource=sub_resource,
        namespace=_meta(shown, "namespace") if namespace is None else namespace,
        name=_meta(shown, "name") if name is None else name,
        user=user if user is not None else UserInfo(),
        obj=obj,
        old=old,
        raw=raw_object if isinstance(raw_object, Mapping) else None,
        raw_old=raw_old if isinstance(raw_old, Mapping) else None,
        dry_run=dry_run,
    )
