"""Builds ``policies/api/fields.json`` from a running kube-apiserver's OpenAPI v3 and discovery.

The table is what strict decoding knows about each kind draguard checks: every field of every
type reachable from the kind, with the JSON type the API server's decoder accepts there, and
which group/version/kinds the server serves. It is derived, never written by hand, from an API
server started with the older DRA versions switched on::

    kube-apiserver ... --runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true,\
resource.k8s.io/v1alpha3=true --feature-gates=DRADeviceTaintRules=true
    python -m tests.api.openapi_fields https://127.0.0.1:6443 TOKEN_OR_- CA_FILE_OR_-

(``tests/api/test_fields_table.py`` checks the committed table against a default 1.36 server.)
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "policies" / "api" / "fields.json"

# The kinds whose documents draguard decodes strictly, by group/version.
CHECKED: dict[str, tuple[str, ...]] = {
    "v1": ("Pod", "Node", "Namespace", "ResourceQuota", "ReplicationController", "PodTemplate"),
    "apps/v1": ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"),
    "batch/v1": ("Job", "CronJob"),
    "scheduling.k8s.io/v1": ("PriorityClass",),
    "resource.k8s.io/v1": ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"),
    "resource.k8s.io/v1beta2": (
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
        "DeviceTaintRule",
    ),
    "resource.k8s.io/v1beta1": ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"),
    "resource.k8s.io/v1alpha3": ("DeviceTaintRule",),
}

_PREFIXES = ("io.k8s.api.", "io.k8s.apimachinery.pkg.apis.", "io.k8s.apimachinery.pkg.")


def short(ref: str) -> str:
    name = ref.removeprefix("#/components/schemas/")
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name.removeprefix(prefix)
    return name


def _scalar(schema: Mapping[str, Any]) -> str | None:
    """The table's word for a schema that is not a struct, or None."""
    if schema.get("format") == "int-or-string":
        return "int-or-string"
    one_of = schema.get("oneOf")
    if one_of and {s.get("type") for s in one_of} == {"string", "number"}:
        return "quantity"
    kind = schema.get("type")
    if kind in ("string", "integer", "number", "boolean"):
        return str(kind)
    if kind == "object" and "properties" not in schema and "additionalProperties" not in schema:
        return "any"  # RawExtension, FieldsV1: raw JSON the decoder keeps without looking inside
    return None


def type_of(prop: Mapping[str, Any], schemas: Mapping[str, Any]) -> str:
    """``string``, ``[]core.v1.Container``, ``{}quantity``, ``core.v1.PodSpec``, ..."""
    if "allOf" in prop:
        (prop,) = prop["allOf"]
    if "$ref" in prop:
        ref = prop["$ref"].removeprefix("#/components/schemas/")
        return _scalar(schemas[ref]) or short(ref)
    if prop.get("type") == "array":
        return "[]" + type_of(prop["items"], schemas)
    if prop.get("type") == "object" and "additionalProperties" in prop:
        return "{}" + type_of(prop["additionalProperties"], schemas)
    found = _scalar(prop)
    if found is None:
        raise ValueError(f"no table word for {prop}")
    return found


def build(
    docs: Mapping[str, Mapping[str, Any]],
    served: Mapping[str, Mapping[str, bool]],
    checked: Mapping[str, tuple[str, ...]] = CHECKED,
) -> dict[str, Any]:
    """The table from OpenAPI v3 documents (by group/version) and discovery (gv -> kind -> namespaced),
    for the ``checked`` kinds."""
    types: dict[str, dict[str, str]] = {}
    kinds: dict[str, dict[str, str]] = {}

    def visit(name: str, schemas: Mapping[str, Any]) -> None:
        if short(name) in types or _scalar(schemas[name]) is not None:
            return
        fields = {
            field: type_of(prop, schemas) for field, prop in schemas[name].get("properties", {}).items()
        }
        types[short(name)] = fields
        for prop in schemas[name].get("properties", {}).values():
            for ref in _refs(prop):
                visit(ref, schemas)

    for gv, names in checked.items():
        schemas = docs[gv]["components"]["schemas"]
        for kind in names:
            (name,) = [
                n
                for n, s in schemas.items()
                if {"group": gv.rpartition("/")[0], "version": gv.rpartition("/")[2], "kind": kind}
                in s.get("x-kubernetes-group-version-kind", [])
            ]
            visit(name, schemas)
            kinds.setdefault(gv, {})[kind] = short(name)
    return {
        "kinds": kinds,
        "types": dict(sorted(types.items())),
        "served": {gv: dict(sorted(k.items())) for gv, k in sorted(served.items())},
    }


def _refs(prop: Mapping[str, Any]) -> list[str]:
    text = json.dumps(prop)
    found = []
    marker = '"$ref": "#/components/schemas/'
    while marker in text:
        text = text.split(marker, 1)[1]
        found.append(text.split('"', 1)[0])
    return found


def fetch(base: str, token: str, ca: str) -> tuple[dict[str, Any], dict[str, dict[str, bool]]]:
    """The OpenAPI documents of CHECKED's group/versions and the discovery of every served one."""
    context = ssl.create_default_context(cafile=None if ca == "-" else ca)
    if ca == "-":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE

    def get(path: str) -> Any:
        request = urllib.request.Request(base + path)
        if token != "-":
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, context=context) as response:
            return json.load(response)

    docs = {gv: get(f"/openapi/v3/{'api' if gv == 'v1' else 'apis'}/{gv}") for gv in CHECKED}
    versions = ["v1"] + [f"{g['name']}/{v['version']}" for g in get("/apis")["groups"] for v in g["versions"]]
    served = {}
    for gv in versions:
        resources = get(("/api/" if gv == "v1" else "/apis/") + gv)["resources"]
        served[gv] = {r["kind"]: r["namespaced"] for r in resources if "/" not in r["name"]}
    return docs, served


def main(argv: list[str]) -> None:
    base, token, ca = argv
    docs, served = fetch(base, token, ca)
    OUT.write_text(json.dumps(build(docs, served), indent=0, sort_keys=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
