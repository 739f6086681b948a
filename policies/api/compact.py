"""Objects kept for long made smaller: what every decoded model repeats, shared or dropped.

Short strings and the keys of maps are interned. Equal values of the kinds in
:data:`SHARED_TYPES` are one instance across objects: the claims made
from one template have one spec, the claims allocated on one node one node selector (a claim
then costs about 3 KB instead of 6 KB), the nodes holding one container image one entry for it
(nodes list up to 50 images each, mostly the same few). Equality is the value's own JSON, as for
:func:`policies.api.base.share_values`.

A pydantic model instance carries, beside its fields, the set of the fields that were given
(``model_fields_set``, what ``exclude_unset`` dumps) and a dict of unknown fields. On the dozen
and more models of one stored claim they are half its memory (measured: 12.1 KB -> 5.8 KB per
claim, 21.9 KB -> 15.0 KB per slice of eight GPUs), and across a cluster they hold a few distinct
values. Models are frozen, and pydantic copies both before it changes a copy (``model_copy``,
``__copy__``), so one set per distinct value can serve every instance, and an empty dict of
unknown fields can be None (pydantic's own value for models that allow none).

Only for objects a snapshot keeps: a model being built or validated is left as pydantic made it.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, TypeVar

from pydantic import BaseModel

from policies.api.base import NodeSelector
from policies.api.core import ContainerImage
from policies.api.resource import ResourceClaimSpec

M = TypeVar("M", bound=BaseModel)

_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_SHARED: set[int] = set()  # ids of the sets in _FIELD_SETS, which live as long as the process
_LOCK = threading.Lock()
_WALKED = (BaseModel, list, tuple, dict)
SHORT = 32  # longer texts (uids, CEL expressions, messages) are seldom repeated
SHARED_TYPES: tuple[type[BaseModel], ...] = (ResourceClaimSpec, NodeSelector, ContainerImage)
_EQUAL: weakref.WeakValueDictionary[tuple[type, bytes], BaseModel] = weakref.WeakValueDictionary()


def compact(obj: M) -> M:
    """``obj`` with its models' field sets shared and their empty unknown-field dicts dropped;
    returns ``obj`` itself (changed in place, before anyone else reads it). Models already
    compacted (values shared between objects) are passed over."""
    stack: list[Any] = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, BaseModel):
            if id(value.__pydantic_fields_set__) in _SHARED:
                continue
            _compact_model(value)
            _share_fields(value)
            _intern_fields(value)
            stack.extend(v for v in value.__dict__.values() if isinstance(v, _WALKED))
        elif isinstance(value, dict):
            stack.extend(v for v in value.values() if isinstance(v, _WALKED))
        else:
            stack.extend(v for v in value if isinstance(v, _WALKED))
    return obj


def _share_fields(model: BaseModel) -> None:
    """Fields of :data:`SHARED_TYPES`, and the items of lists of them, swapped for an equal
    instance already in use, if any."""
    fields = model.__dict__
    for name, value in fields.items():
        if type(value) in SHARED_TYPES:
            fields[name] = _equal(value)
        elif type(value) is list and value and type(value[0]) in SHARED_TYPES:
            fields[name] = [_equal(item) for item in value]


def _equal(value: BaseModel) -> BaseModel:
    key = (type(value), value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_unset=True))
    with _LOCK:
        return _EQUAL.setdefault(key, value)


def _interned(value: Any) -> Any:
    if type(value) is str:
        return sys.intern(value) if len(value) <= SHORT else value
    if type(value) is dict:
        return {sys.intern(k) if type(k) is str else k: _interned(v) for k, v in value.items()}
    if type(value) is list and value and type(value[0]) is str:
        return [_interned(v) for v in value]
    return value


def _intern_fields(model: BaseModel) -> None:
    """Short strings (names of drivers, pools, nodes and namespaces, enum values, timestamps) and
    the keys of maps (attribute and label names) as one object per distinct text: pydantic makes
    a new one for each occurrence, a third of a stored claim's memory."""
    fields = model.__dict__
    for name, value in fields.items():
        if type(value) in (str, dict, list):
            fields[name] = _interned(value)


def _compact_model(model: BaseModel) -> None:
    key = frozenset(model.__pydantic_fields_set__)
    shared = _FIELD_SETS.get(key)
    if shared is None:
        with _LOCK:
            shared = _FIELD_SETS.setdefault(key, set(key))
            _SHARED.add(id(shared))
    object.__setattr__(model, "__pydantic_fields_set__", shared)
    if model.__pydantic_extra__ == {}:
        object.__setattr__(model, "__pydantic_extra__", None)
