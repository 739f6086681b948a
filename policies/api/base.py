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
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, model_validator
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


# Shared instances of SharedValue models: (class, the raw fields with each value's type) -> instance.
_SHARED: weakref.WeakValueDictionary[tuple[Any, ...], SharedValue] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()
_SCALARS = (str, int, float, bool, type(None))


@cache
def _wire_names(cls: type[BaseModel]) -> frozenset[str]:
    return frozenset(field.alias or name for name, field in cls.model_fields.items())


class SharedValue(ApiModel):
    """A small value that thousands of objects repeat: decoded once and shared while in use.

    A 5,000-node cluster publishes 40,000 GPUs whose attributes and capacities are mostly the same
    few values (model, driver version, index, memory size), and each decoded value costs some 600
    bytes, half of a snapshot's memory. Identical inputs of scalars decode to one shared instance
    (the models are frozen and hold nothing mutable); the key carries each value's type, so strict
    validation still sees every ``1`` that should have been ``true``. The table holds instances
    weakly: a value lives only as long as some object uses it.
    """

    @model_validator(mode="wrap")
    @classmethod
    def _shared(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Only wire names (no unknown field, no Python name that a decoder might read differently).
        if (
            not isinstance(data, dict)
            or not data.keys() <= _wire_names(cls)
            or not all(isinstance(v, _SCALARS) for v in data.values())
        ):
            return handler(data)
        key = (cls, *((k, type(v), v) for k, v in data.items()))
        found = _SHARED.get(key)
        if found is None:
            found = handler(data)
            with _SHARED_LOCK:
                _SHARED[key] = found
        return found


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


class Condition(ApiModel):
    """metav1.Condition."""

    type: str = ""
    status: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None
