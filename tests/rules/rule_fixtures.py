"""Requests and snapshots for the rule tests, built in-process.

The cluster is examples/gpu-cluster (three nodes, four A100s on node-1 and node-2, two H100s on
node-3, claim team-a/running-job allocated on node-1) plus whatever a test adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from policies.api.admission import UserInfo
from policies.api.base import TypedObject
from policies.api.kinds import decode
from policies.config import Config
from policies.rules.engine import Context, Request
from policies.snapshot import Snapshot
from webhook.manifests import load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster"
NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
ADMIN = UserInfo(username="kubernetes-admin", groups=["system:masters", "system:authenticated"])
ALICE = UserInfo(username="alice", groups=["system:authenticated"])

RESOURCES = {
    "DeviceClass": ("resource.k8s.io", "deviceclasses"),
    "ResourceClaim": ("resource.k8s.io", "resourceclaims"),
    "ResourceClaimTemplate": ("resource.k8s.io", "resourceclaimtemplates"),
    "ResourceSlice": ("resource.k8s.io", "resourceslices"),
    "Pod": ("", "pods"),
    "Namespace": ("", "namespaces"),
}


@cache
def gpu_cluster_objects() -> tuple[TypedObject, ...]:
    return tuple(x.obj for x in load([str(EXAMPLES)]))


def cluster(*extra: Mapping[str, Any] | TypedObject, base: Iterable[TypedObject] | None = None) -> Snapshot:
    """The example cluster (or ``base``) plus ``extra`` objects (JSON or models); later ones win."""
    objects = list(gpu_cluster_objects() if base is None else base)
    objects += [x if isinstance(x, TypedObject) else decode(x) for x in extra]
    # "Later ones win" like an update would; Snapshot.build itself keeps same-named objects apart.
    latest = {(o.kind, o.namespace, o.name): o for o in objects}
    return Snapshot.build(latest.values())


def context(snapshot: Snapshot | None = None, fresh: bool = True, **rules: Any) -> Context:
    """A context whose config sets ``rules`` (``selectors={"warnNoMatch": False}``)."""
    return Context(
        cluster() if snapshot is None else snapshot,
        Config.model_validate({"rules": rules}),
        NOW,
        snapshot_fresh=fresh,
    )


def admission(
    obj: Mapping[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    user: UserInfo = ALICE,
    sub_resource: str = "",
) -> Request:
    """An admission request for ``obj`` (or ``old`` on DELETE), decoded as the webhook decodes it."""
    shown = obj if obj is not None else old
    assert shown is not None
    kind = shown["kind"]
    group, resource = RESOURCES[kind]
    meta = shown.get("metadata", {})
    return Request(
        uid="0f5c", operation=operation, group=group, version="v1", kind=kind, resource=resource,
        sub_resource=sub_resource, namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        user=user,
        obj=decode(obj) if obj is not None else None,
        old=decode(old) if old is not None else None,
        raw=obj, raw_old=old,
    )
