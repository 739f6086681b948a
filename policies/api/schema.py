"""What the Kubernetes 1.36 API server serves, and the fields its decoder knows, as data.

``fields.json`` is generated from a real kube-apiserver 1.36.2 (its OpenAPI v3 documents and its
discovery; see ``tests/api/openapi_fields.py``), never written by hand:

* ``served``: every group/version a default 1.36 server serves (plus the older DRA versions, which
  it does not serve by default, see :data:`OFF_BY_DEFAULT`), each kind with whether it is
  namespaced;
* ``kinds``: for the kinds draguard decodes strictly, the type of the whole object;
* ``types``: each type's fields, written as ``string``, ``integer``, ``number``, ``boolean``,
  ``quantity`` (a string or a number), ``int-or-string``, ``any`` (raw JSON the decoder keeps
  without looking inside: a claim's opaque parameters, managedFields), another type's name, or
  ``[]T`` / ``{}T`` for a list or a map of T.

The table is read once, the first time a command needs it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FIELDS_FILE = Path(__file__).with_name("fields.json")

# resource.k8s.io versions a 1.36 server knows but does not serve unless ``--runtime-config``
# turns them on (betaAPIGroupVersionsDisabledByDefault and alphaAPIGroupVersionsDisabledByDefault
# in pkg/controlplane/instance.go).
OFF_BY_DEFAULT = frozenset({"resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"})

# Groups that belong to Kubernetes itself but that a 1.36 server serves no version of by default
# (removed, or alpha only): an object in them is refused, never taken for a custom resource.
_UNSERVED_BUILTIN_GROUPS = frozenset(
    {
        "core",  # not a group: "core/v1" is a common mistake for "v1"
        "extensions",
        "settings.k8s.io",
        "imagepolicy.k8s.io",
        "internal.apiserver.k8s.io",
        "storagemigration.k8s.io",
    }
)


class DuplicateKeys(dict[str, Any]):
    """A JSON/YAML object in which some keys appeared more than once (the last value is kept, as
    Go's decoder keeps it); ``duplicates`` names them, for strict decoding's ``duplicate field``.
    The manifest reader makes one only where a key repeats; every other object is a plain dict."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: Any = (), duplicates: tuple[str, ...] = ()) -> None:
        super().__init__(pairs)
        self.duplicates = duplicates


@cache
def _table() -> dict[str, Any]:
    with open(FIELDS_FILE, encoding="utf-8") as fh:
        table: dict[str, Any] = json.load(fh)
    return table


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` -> ``""`` (the core group)."""
    return api_version.rpartition("/")[0]


def known_versions() -> list[str]:
    """Every group/version 1.36 knows, served by default or not."""
    return list(_table()["served"])


def served_kinds(api_version: str) -> dict[str, bool] | None:
    """Kind -> namespaced for a group/version 1.36 knows (served by default or not), else None."""
    kinds: dict[str, bool] | None = _table()["served"].get(api_version)
    return kinds


def versions_serving(kind: str, group: str | None = None) -> list[str]:
    """The group/versions (of ``group``, or of any group) in which ``kind`` is served by default."""
    return [
        gv
        for gv, kinds in _table()["served"].items()
        if (group is None or group_of(gv) == group) and kind in kinds and gv not in OFF_BY_DEFAULT
    ]


def builtin_group(group: str) -> bool:
    """Whether ``group`` is Kubernetes' own (an object there that 1.36 does not serve is refused)
    rather than a custom resource's or an aggregated API's (skipped)."""
    if group in _UNSERVED_BUILTIN_GROUPS or group == "":
        return True
    return any(group_of(gv) == group for gv in _table()["served"])


def is_namespaced(api_version: str, kind: str) -> bool | None:
    return (served_kinds(api_version) or {}).get(kind)


def object_type(api_version: str, kind: str) -> str | None:
    """The type name of a kind draguard decodes strictly, else None."""
    name: str | None = _table()["kinds"].get(api_version, {}).get(kind)
    return name


def fields(type_name: str) -> dict[str, str]:
    """Field name -> field type of a struct type in the table."""
    found: dict[str, str] = _table()["types"][type_name]
    return found


def is_struct(type_name: str) -> bool:
    return type_name in _table()["types"]
