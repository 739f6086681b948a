"""The committed field table (``policies/api/fields.json``) is what a real kube-apiserver 1.36 says:
rebuilt from the fixture's server, for every group/version it serves by default, it must match."""

from __future__ import annotations

import json

from controlplane import ControlPlane, call
from openapi_fields import CHECKED, OUT, build

from policies.api.schema import OFF_BY_DEFAULT


def test_the_table_is_the_api_server_s(control_plane: ControlPlane) -> None:
    api = control_plane.client()
    default = {gv: kinds for gv, kinds in CHECKED.items() if gv not in OFF_BY_DEFAULT}
    docs = {
        gv: call(api, "GET", f"/openapi/v3/{'api' if gv == 'v1' else 'apis'}/{gv}").body for gv in default
    }
    versions = ["v1"] + [
        v["groupVersion"] for g in call(api, "GET", "/apis").body["groups"] for v in g["versions"]
    ]
    served = {}
    for gv in versions:
        resources = call(api, "GET", "/api/v1" if gv == "v1" else f"/apis/{gv}").body["resources"]
        served[gv] = {r["kind"]: r["namespaced"] for r in resources if "/" not in r["name"]}
    rebuilt = build(docs, served, default)
    committed = json.loads(OUT.read_text())
    assert rebuilt["kinds"] == {gv: committed["kinds"][gv] for gv in default}
    assert {name: committed["types"][name] for name in rebuilt["types"]} == rebuilt["types"]
    assert {gv: committed["served"].get(gv) for gv in rebuilt["served"]} == rebuilt["served"]
    # The committed table also holds the older DRA versions, which a default server does not serve.
    assert set(committed["served"]) - set(rebuilt["served"]) == OFF_BY_DEFAULT
