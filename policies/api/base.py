"""Conventions shared by every API model: camelCase on the wire, snake_case in Python.

Kubernetes objects are JSON documents that the API server owns; draguard only reads them, decides,
and sometimes hands them back (a dry-run result, a JSONPatch). So the models must never lose data:

* unknown fields are *kept* (``extra="allow"``) and dumped back, so an object from a newer cluster
  (a 1.37 field draguard does not know yet) survives a parse/dump round trip; the offline validator
  reports them separately, the way ``kubectl --validate=strict`` does;
* absent and explicitly-null fields stay distinct: dumps use ``exclude_unset`` so the output has
  exactly the keys of the input;
* models are frozen: a snapshot is shared by concurrent requests and must not be mutated by a rule;
* types are strict: the API server refuses ``count: "2"`` or ``adminAccess: "yes"`` (Go's JSON
  decoder does not coerce), so the models refuse them too instead of silently changing the value.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """Base of every API model: aliases, unknown-field preservation, immutability."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
        # No coercion ("2" -> 2, "yes" -> True): a wrong JSON type is a decode error, as in Go.
        strict=True,
        ser_json_timedelta="iso8601",
    )

    def to_json(self) -> dict[str, Any]:
        """The object's JSON form: camelCase keys, only the keys that were set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


M = TypeVar("M", bound=ApiModel)


# Values in use, for share_values: (class, the value's JSON) -> the instance.
_SHARED: weakref.WeakValueDictionary[tuple[type, bytes], ApiModel] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def share_values(values: dict[str, M] | None) -> dict[str, M] | None:
    """``values`` with each value swapped for an equal one already in use, where there is one.

    A 5,000-node cluster publishes 40,000 GPUs whose attributes and capacities are mostly the same
    few values (model, driver version, index, memory size), and each decoded value costs some 600
    bytes: half of a snapshot's memory. The models are frozen, so equal values can be one object.
    "Equal" is the value's own JSON, as it reads and writes back: a quantity written ``1.5Gi`` stays
    apart from ``1536Mi``, an explicit null from an absent field. A value with unknown fields is
    left alone. The table holds values weakly, so one lives only as long as something uses it.
    """
    if not values:
        return values
    return {name: _shared(value) for name, value in values.items()}


def _shared(value: M) -> M:
    if value.model_extra:
        return value
    key = (type(value), value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_unset=True))
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            _SHARED[key] = value
            return value
    return found  # type: ignore[return-value]


class OwnerReference(ApiModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiModel):
    """metav1.ObjectMeta, every field in Go's order, so that an extra key really is an unknown field."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    # Server-side apply bookkeeping; never read, kept verbatim.
    managed_fields: list[dict[str, Any]] | None = None


class ListMeta(ApiModel):
    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")


class TypedObject(ApiModel):
    """An object with apiVersion/kind/metadata: the unit that manifests and the API server deal in."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced objects, ``name`` otherwise (as upstream logs them)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


# --- core/v1 node selection: shared by ResourceSlice (resource.k8s.io) and Pod affinity (core) ---


class NodeSelectorRequirement(ApiModel):
    # Required by the API, but a missing key is a validation error ("Required value"), not a decode error.
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(ApiModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(ApiModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class LabelSelectorRequirement(ApiModel):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class LabelSelector(ApiModel):
    """metav1.LabelSelector: pod affinity terms and topology spread constraints select pods with it."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Condition(ApiModel):
    """metav1.Condition."""

    type: str = ""
    status: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None
