"""Objects of the cluster as the snapshot keeps them: the API server's JSON, decoded, trimmed of
what no decision reads and made compact.

The live state (list and watch) and ``serve --state`` files both read through :class:`Reader`,
so a cluster reads the same from either: pods become :class:`PodInfo` records (whole only while
they wait for a node and matter to a rule), Nodes lose their conditions and the rest of their
status but allocatable, capacity and images (ImageLocality scores by them), every object loses
``metadata.managedFields``, and the models kept are compacted (:mod:`policies.api.compact`).

Objects from a cluster were defaulted by its API server; hand-written state files may not be, so
a Reader given ``now`` applies the API server's defaulting first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from policies.api.base import TypedObject
from policies.api.compact import compact
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.scheduler.podinfo import PodInfo, Shapes

KeepPod = Callable[[PodInfo], bool]


def every_pod(pod: PodInfo) -> bool:
    return True


_NODE_STATUS_READ = ("allocatable", "capacity", "images")


def trim(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without what nothing reads and can be large: ``metadata.managedFields``, and of a
    Node's status all but ``allocatable``, ``capacity`` and ``images`` (conditions, addresses)."""
    obj = dict(raw)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        obj["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    status = obj.get("status")
    if obj.get("kind") == "Node" and isinstance(status, dict):
        obj["status"] = {k: v for k, v in status.items() if k in _NODE_STATUS_READ}
    return obj


class Reader:
    """Decodes objects for one cluster state; keeps the pod shapes seen (:class:`Shapes`).

    ``keep_pod`` says which pods the snapshot holds at all; ``now``, when given, applies the API
    server's defaulting. Decoding errors are :class:`policies.api.kinds.DecodeError`."""

    def __init__(self, keep_pod: KeepPod = every_pod, now: datetime | None = None) -> None:
        self.shapes = Shapes()
        self._keep_pod = keep_pod
        self._now = now

    def _decoded(self, raw: Mapping[str, Any]) -> TypedObject:
        obj = decode(raw)
        return apply_defaults(obj, self._now) if self._now is not None else obj

    def _pod(self, raw: Mapping[str, Any]) -> Pod:
        pod = self._decoded(raw)
        assert isinstance(pod, Pod)
        return compact(pod)

    def object(self, raw: Mapping[str, Any]) -> TypedObject:
        """Any object but a pod, from the API server's JSON, as kept."""
        return compact(self._decoded(trim(raw)))

    def stored(self, obj: TypedObject) -> TypedObject:
        """Any object but a pod, already decoded from :func:`trim`'s output, as kept."""
        return compact(apply_defaults(obj, self._now) if self._now is not None else obj)

    def written_pod(self, raw: Mapping[str, Any]) -> Pod:
        """A pod whole (one as written, which admission will change before it is recorded)."""
        return self._pod(trim(raw))

    def pod(self, raw: Mapping[str, Any]) -> tuple[PodInfo, Pod | None] | None:
        """A pod's record and, while it waits for a node, the pod itself; None for a pod the
        snapshot does not keep."""
        info = self.shapes.record(raw, self._pod)
        if not self._keep_pod(info):
            return None
        return info, (self._pod(trim(raw)) if info.pending else None)
