"""policies.snapshot: the indexes a snapshot keeps for the rules."""

from __future__ import annotations

from typing import Any

from policies.api.kinds import decode
from policies.snapshot import Snapshot


def quota(name: str, namespace: str | None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace is not None else {})}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata,
            "spec": {"hard": {"requests.cpu": "4"}}}


def test_quotas_are_found_by_namespace_and_a_namespace_less_one_is_in_default() -> None:
    quotas = (quota("a", "team-a"), quota("b", "team-b"), quota("a2", "team-a"), quota("d", None))
    snapshot = Snapshot.build(decode(q) for q in quotas)
    assert [q.name for q in snapshot.namespace_quotas("team-a")] == ["a", "a2"]
    assert [q.name for q in snapshot.namespace_quotas("team-b")] == ["b"]
    # Keyed like every namespaced object: where kubectl would apply a manifest without a namespace.
    assert [q.name for q in snapshot.namespace_quotas("default")] == ["d"]
    assert [q.name for q in snapshot.namespace_quotas("")] == ["d"]
    assert snapshot.namespace_quotas("team-c") == ()
