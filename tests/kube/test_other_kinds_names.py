"""The name rule draguard applies to each kind it does not otherwise check
(``policies.validation.othermeta``) is the one kube-apiserver 1.36.2 applies: every kind the server
stores is created (server-side dry run) with names that one rule refuses and another accepts, and
draguard must refuse exactly the names for which the server names ``metadata.name``."""

from __future__ import annotations

from typing import Any

import pytest
from controlplane import ControlPlane, call

from policies.api import schema
from policies.validation.othermeta import name_rule

# A dot (a DNS label refuses it), an underscore and upper case (a subdomain refuses them), a "%"
# (even a path segment refuses it).
NAMES = ("a.b", "a_b", "A", "a%b")
# Kinds whose name must also match their spec (plural.group, version.group, an IP address): the
# server names metadata.name for that too, so draguard's refusals must only be among the server's.
SPEC_NAMED = {"CustomResourceDefinition", "APIService", "IPAddress"}


def _kinds() -> list[tuple[str, str]]:
    return [
        (gv, kind)
        for gv in schema.known_versions()
        if gv not in schema.OFF_BY_DEFAULT
        for kind in schema.served_kinds(gv) or {}
        if schema.object_type(gv, kind) is None
    ]


@pytest.fixture(scope="module")
def resources(control_plane: ControlPlane) -> dict[tuple[str, str], dict[str, Any]]:
    api = control_plane.client()
    found: dict[tuple[str, str], dict[str, Any]] = {}
    versions = ["v1"] + [
        v["groupVersion"] for g in call(api, "GET", "/apis").body["groups"] for v in g["versions"]
    ]
    for gv in versions:
        for r in call(api, "GET", "/api/v1" if gv == "v1" else f"/apis/{gv}").body.get("resources", []):
            if "/" not in r["name"]:
                found[(gv, r["kind"])] = r
    return found


def _server_refuses_name(
    control_plane: ControlPlane, gv: str, resource: dict[str, Any], name: str
) -> bool | None:
    """Whether the server names ``metadata.name``; None when it does not get as far as validating
    (a kind it does not store, a create it refuses before validation)."""
    base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
    path = (
        f"{base}/namespaces/default/{resource['name']}"
        if resource["namespaced"]
        else f"{base}/{resource['name']}"
    )
    body = {"apiVersion": gv, "kind": resource["kind"], "metadata": {"name": name}}
    answer = call(control_plane.client(), "POST", path, body, {"dryRun": "All"})
    if answer.status not in (201, 422):
        return None
    causes = answer.body.get("details", {}).get("causes", [])
    return any(c.get("field") == "metadata.name" for c in causes)


def test_each_kind_is_named_by_the_servers_rule(
    control_plane: ControlPlane, resources: dict[tuple[str, str], dict[str, Any]]
) -> None:
    compared = 0
    disagreements = []
    for gv, kind in _kinds():
        resource = resources.get((gv, kind))
        assert resource is not None, f"{gv} {kind}: the fields table says 1.36 serves it"
        for name in NAMES:
            server = _server_refuses_name(control_plane, gv, resource, name)
            if server is None:
                continue
            ours = bool(name_rule(gv, kind)(name))
            compared += 1
            if ours != server and not (kind in SPEC_NAMED and server):
                disagreements.append(f"{gv} {kind} {name!r}: server refuses: {server}, draguard: {ours}")
    assert disagreements == []
    assert compared > 4 * 40  # every kind the server stores was asked about
