"""Hostile input and overload against ``draguard serve --demo``: does every request get an answer,
never a 5xx, quickly, while the probes keep answering and memory stays flat?

Run: ``python benchmarks/fuzz.py [--requests N] [--concurrency C] [--seed S] [--json FILE]``;
``--quick`` is the short seeded run the test suite makes (a few seconds); the issue's long run is
``--requests 100000 --concurrency 16``. Exit code 0 when every target below is met, 1 when not.

The server runs as a subprocess on 127.0.0.1 (the demo cluster, a generated CA). Each request is
drawn, from the seed and its index alone, from these families (so a run can be repeated, and a
request reproduced from its index):

* **valid**: an AdmissionReview of every kind and operation the rules see (Pods, evictions,
  claims and their status, templates, classes, slices, namespaces, nodes, quotas; by users, admins
  and nodes) to every admission path (``/validate``, ``/mutate``, ``/validate/<rule>``...);
* **mutated**: the same, with fields deleted, retyped, swapped for hostile values (lone
  surrogates, huge numbers and strings, deep structures), in the object, the quantities, the
  user and the envelope;
* **cel**: claims and classes with long, many, nested or regex-heavy CEL selectors;
* **dryrun**: ``/v1/dryrun`` questions, valid and mutated;
* **bytes**: garbage, truncated and bit-flipped JSON, invalid UTF-8, JSON nested up to a million
  levels, scalars and arrays for bodies;
* **big**: bodies of about 3 MiB, just under and just over the cap, built of many small objects;
* **encoding**: gzip and deflate bombs, broken gzip and deflate, ``br``, ``zstd`` and unknown
  ``Content-Encoding``;
* **misc**: wrong content types and methods, unknown paths, the metrics and probe ports.

Reported: the status histogram (per family), answers that say "could not process", dropped
connections (a request the server closed the connection on without answering, re-sent on a fresh
connection to see whether the request or the connection was the problem), the slowest answers,
the probe port's ``/healthz`` latency sampled every 40 ms from a separate process (the kubelet's
view: a fresh connection each time), the server's RSS over time, and its log: lines, tracebacks
and what they were about.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import gc
import gzip
import http.client
import json
import multiprocessing
import os
import random
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # benchmarks/webhook.py would shadow the webhook package

from benchmarks.harness import wait_for_line  # noqa: E402
from policies.rules.registry import RULES  # noqa: E402
from webhook import demo  # noqa: E402
from webhook.server import split_rules  # noqa: E402

MIB = 1024 * 1024
ADMISSION_PATHS = tuple(f"/{path}" for path in split_rules(RULES))
PROBE_INTERVAL = 0.04
# The targets of issue 16.
SLOW = 5.0
PROBE_P99, PROBE_MAX = 1.0, 2.0
RSS_GROWTH = 0.10


# --- the requests ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One request: ``port`` is ``https``, ``metrics`` or ``health``."""

    family: str
    what: str
    path: str
    body: bytes = b""
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    port: str = "https"


def _objects() -> dict[str, Any]:
    """The demo cluster's objects by ``Kind/name``, plus a namespace, an eviction and a quota."""
    found = {f"{d.raw['kind']}/{d.raw['metadata']['name']}": d.raw for d in demo.documents()}
    found["Namespace/team-a"] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"resource.kubernetes.io/admin-access": "true"}},
    }
    found["Eviction/inference"] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "inference", "namespace": "team-a"},
    }
    found["ResourceQuota/gpus"] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "team-a"},
        "spec": {"hard": {"requests.cpu": "10", "gpu.example.com.deviceclass.resource.k8s.io/devices": "4"}},
    }
    return found


OBJECTS = _objects()
WRITES = ("CREATE", "UPDATE", "DELETE")
DRA = "resource.k8s.io"
# (object, group, version, resource, sub-resource, operations)
TARGETS: tuple[tuple[str, str, str, str, str, tuple[str, ...]], ...] = (
    ("Pod/inference", "", "v1", "pods", "", WRITES),
    ("Eviction/inference", "policy", "v1", "pods", "eviction", ("CREATE",)),
    ("ResourceClaim/three-a100", DRA, "v1", "resourceclaims", "", WRITES),
    ("ResourceClaim/running-job", DRA, "v1", "resourceclaims", "status", ("UPDATE",)),
    ("ResourceClaimTemplate/one-large-gpu", DRA, "v1", "resourceclaimtemplates", "", WRITES),
    ("DeviceClass/large-gpu.example.com", DRA, "v1", "deviceclasses", "", WRITES),
    ("ResourceSlice/node-1-gpu.example.com", DRA, "v1", "resourceslices", "", WRITES),
    ("Namespace/team-a", "", "v1", "namespaces", "", ("CREATE", "UPDATE")),
    ("Node/node-1", "", "v1", "nodes", "", ("CREATE", "UPDATE")),
    ("ResourceQuota/gpus", "", "v1", "resourcequotas", "", ("CREATE",)),
)
USERS = (
    {"username": "alice", "groups": ["team-a", "system:authenticated"]},
    {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
    {"username": "system:node:node-1", "groups": ["system:nodes"]},
    {"username": "system:serviceaccount:gpu:driver", "groups": ["system:serviceaccounts"], "uid": "u-1"},
)
HOSTILE_STRINGS = (
    "\ud800",  # a lone surrogate: valid JSON ("\ud800"), not a valid string in any encoding
    "\udfff\ud800",
    "x\udc00y",
    "",
    "\x00",
    "‮rtl",
    "a" * 70_000,
    "1e999999999",
    "9" * 5000,
    "0.000000000000000000000000001",
    "-1",
    "NaN",
    "1Ki\ud800",
)


def _hostile_value(rng: random.Random) -> Any:
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(HOSTILE_STRINGS)
    if kind == 1:
        return rng.choice([None, True, False, 0, -1, 2**63, -(2**63) - 1, 10**400, 1e308, -0.0])
    if kind == 2:
        return rng.choice([[], {}, [None], {"": None}])
    if kind == 3:  # written into the JSON text by _encode: json.dumps itself would recurse too deep
        return f"{DEEP}{rng.choice([50, 300, 900, 2000, 20_000])}"
    if kind == 4:
        return [rng.choice(HOSTILE_STRINGS[:4])] * rng.randrange(1, 2000)
    if kind == 5:
        return {f"k{i}": i for i in range(rng.randrange(1, 3000))}
    if kind == 6:
        return rng.choice(["1", "100Gi", "1.5", "1e3", "5m", "0x10", " 1 ", "1Ki\ud800", "\ud8001"])
    return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(1, 64)))


def _nested(depth: int) -> bytes:
    """JSON ``depth`` levels deep, lists and objects alternating."""
    return b'[{"n":' * (depth // 2) + b'"leaf"' + b"}]" * (depth // 2)


def review(target: int, operation: str, user: dict[str, Any], uid: str) -> dict[str, Any]:
    """The AdmissionReview the API server would send for ``TARGETS[target]`` and ``operation``."""
    name, group, version, resource, sub, _ = TARGETS[target]
    obj = copy.deepcopy(OBJECTS[name])
    meta = obj["metadata"]
    old = None
    if operation == "UPDATE":
        old = copy.deepcopy(obj)
        meta.setdefault("labels", {})["changed"] = "yes"
        if sub == "status":
            obj["status"]["reservedFor"].append({"resource": "pods", "name": "inference", "uid": "pod-uid-2"})
    elif operation == "DELETE":
        obj, old = None, obj
    kind = OBJECTS[name]["kind"]
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": meta["name"],
        "operation": operation,
        "userInfo": copy.deepcopy(user),
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    if sub:
        request["subResource"] = sub
    if "namespace" in meta:
        request["namespace"] = meta["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _valid(rng: random.Random, index: int) -> dict[str, Any]:
    target = rng.randrange(len(TARGETS))
    return review(target, rng.choice(TARGETS[target][5]), rng.choice(USERS), f"fuzz-{index}")


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) inside a JSON value, the root excluded."""
    items: Any = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )
    for key, child in items:
        yield (*path, key), child
        yield from _places(child, (*path, key))


def _set(root: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> None:
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


# Fields whose hostile values reached code paths the first fuzzing found broken (issue 16).
AIMED = (
    ("request", "object", "spec", "containers", 0, "resources", "requests", "cpu"),
    ("request", "userInfo", "username"),
    ("request", "uid"),
    ("request", "name"),
    ("request", "namespace"),
    ("request", "operation"),
    ("request", "kind", "kind"),
    ("request", "userInfo", "groups"),
    ("request", "userInfo", "extra"),
    ("request", "object", "metadata", "name"),
    ("request", "object"),
    ("request", "oldObject"),
    ("request",),
)


def _mutated(rng: random.Random, index: int) -> tuple[str, dict[str, Any]]:
    body = _valid(rng, index)
    done = []
    for _ in range(rng.randrange(1, 4)):
        try:
            done.append(_mutate(rng, body))
        except (KeyError, IndexError, TypeError):  # an earlier mutation took the place away
            continue
    return "; ".join(done)[:120], body


def _mutate(rng: random.Random, body: dict[str, Any]) -> str:
    """One mutation of ``body``, in place; what it did."""
    if rng.random() < 0.3:
        aimed: tuple[Any, ...] = rng.choice(AIMED)
        _set(body, aimed, _hostile_value(rng))
        return "set " + ".".join(map(str, aimed))
    where, _ = rng.choice(list(_places(body["request"])))
    if rng.random() < 0.3:
        _set(body["request"], where, None, delete=True)
        return "delete request." + ".".join(map(str, where))
    _set(body["request"], where, _hostile_value(rng))
    return "set request." + ".".join(map(str, where))


def _selector_claim(expressions: list[str], requests: int) -> dict[str, Any]:
    per = max(1, len(expressions) // requests)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "cel", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": f"r{i}",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "selectors": [
                                {"cel": {"expression": e}} for e in expressions[i * per : (i + 1) * per]
                            ],
                        },
                    }
                    for i in range(requests)
                ]
            }
        },
    }


ATTR = 'device.attributes["gpu.example.com"]'


def _or_chain(terms: int, offset: int = 0) -> str:
    """``device...index == N || ...``: 190 terms are just under the 10 KiB limit of an expression."""
    return " || ".join(f"{ATTR}.index == {offset + i}" for i in range(terms))


CEL_SHAPES: dict[str, Callable[[random.Random], list[str]]] = {
    # One selector near (or past) the 10 KiB limit: parsed, checked and costed in full.
    "long or-chain": lambda rng: [_or_chain(rng.choice([100, 185, 260]))],
    "long string concat": lambda rng: [" + ".join([f"{ATTR}.uuid"] * rng.choice([100, 225])) + ' == "x"'],
    "regexes": lambda rng: [
        f'{ATTR}.uuid.matches("{pattern}")'
        for pattern in ("(a+)+$", "^(a|aa)+$", "(x+x+)+y", "(.*a){20}") * 8
    ],
    "nested comprehensions": lambda rng: [
        "["
        + ",".join(str(i) for i in range(rng.choice([100, 400])))
        + "].all(x, "
        + "[1,2,3,4,5,6,7,8,9,10].all(y, [1,2,3,4,5,6,7,8,9,10].all(z, x + y + z > 0)))"
    ],
    "deep parentheses": lambda rng: ["(" * rng.choice([50, 200, 2000]) + "true" + ")" * 2000],
    "many selectors": lambda rng: [f'{ATTR}.model == "a{i}" || {ATTR}.index >= {i}' for i in range(32 * 16)],
    # 64 different long selectors: none is compiled from the cache.
    "many long selectors": lambda rng: [_or_chain(180, rng.randrange(10**6)) for _ in range(64)],
}


def _cel(rng: random.Random, index: int) -> tuple[str, dict[str, Any]]:
    shape = rng.choice(sorted(CEL_SHAPES))
    expressions = CEL_SHAPES[shape](rng)
    claim = _selector_claim(expressions, min(32, max(1, len(expressions) // 16)))
    target = TARGETS.index(next(t for t in TARGETS if t[0] == "ResourceClaim/three-a100"))
    body = review(target, "CREATE", USERS[0], f"fuzz-{index}")
    if rng.random() < 0.3:  # the same selectors on a class: evaluated over every device
        body["request"]["kind"]["kind"] = body["request"]["requestKind"]["kind"] = "DeviceClass"
        body["request"]["resource"]["resource"] = "deviceclasses"
        body["request"].pop("namespace")
        selectors = [s for r in claim["spec"]["devices"]["requests"] for s in r["exactly"]["selectors"]]
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "cel"},
                 "spec": {"selectors": selectors[:32]}}  # fmt: skip
        shape += " (class)"
    body["request"]["object"] = claim
    return shape, body


def _question(rng: random.Random) -> dict[str, Any]:
    pod, template = OBJECTS["Pod/inference"], OBJECTS["ResourceClaimTemplate/one-large-gpu"]
    claim = OBJECTS["ResourceClaim/three-a100"]
    return rng.choice(
        [
            {"pod": pod, "claimTemplates": [template]},
            {"claims": [claim]},
            {"claims": [claim], "nodes": ["node-1", "node-2"], "limit": 2},
            {"claimTemplates": [template], "limit": 1},
        ]
    )


def _dryrun(rng: random.Random, index: int) -> Case:
    question = copy.deepcopy(_question(rng))
    what = "valid"
    if rng.random() < 0.6:
        where, _ = rng.choice(list(_places(question)))
        question_value = _hostile_value(rng)
        _set(question, where, question_value)
        what = "set " + ".".join(map(str, where))
    return Case("dryrun", what[:120], "/v1/dryrun", _encode(question))


DEEP = "@deep@"


def _encode(value: Any) -> bytes:
    """``value`` as JSON, with each ``"@deep@N"`` string replaced by JSON nested N levels."""
    # ensure_ascii (the default) writes a lone surrogate as the escape "\ud800", which is valid JSON.
    text = json.dumps(value).encode()
    if DEEP.encode() not in text:
        return text
    return re.sub(rb'"@deep@(\d+)"', lambda m: _nested(int(m.group(1))), text)


def _bytes(rng: random.Random, index: int) -> tuple[str, bytes]:
    valid = _encode(_valid(rng, index))
    kind = rng.randrange(11)
    if kind == 0:
        return "random bytes", rng.randbytes(rng.randrange(0, 4096))
    if kind == 1:
        return "truncated", valid[: rng.randrange(len(valid))]
    if kind == 2:
        flipped = bytearray(valid)
        for _ in range(rng.randrange(1, 8)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return "bytes flipped", bytes(flipped)
    if kind == 3:
        depth = rng.choice([100, 254, 256, 1000, 5000, 10_000, 100_000, 1_000_000])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        return f"nested {depth}", opener * depth + b"1" + closer * depth
    if kind == 4:
        depth = rng.choice([1000, 3000, 20_000])
        return f"object nested {depth}", valid.replace(
            b'"object": {', b'"object": {"deep": ' + b"[" * depth + b"]" * depth + b",", 1
        )
    if kind == 5:
        return "scalar", rng.choice([b"null", b"1", b'"review"', b"[]", b"true", b"[{}]", b"", b" ", b"{}"])
    if kind == 6:
        return "invalid utf-8", valid.replace(
            b'"alice"', rng.choice([b'"\xff\xfe"', b'"\xed\xa0\x80"', b'"\xc0\xaf"'])
        )
    if kind == 7:
        return "utf-16", json.dumps(_valid(rng, index)).encode("utf-16")
    if kind == 8:
        return "NaN and trailing", valid[:-1] + rng.choice(
            [b', "x": NaN}', b"} trailing", b"}}", b', "x": Infinity}']
        )
    if kind == 9:
        return "lone surrogate escapes", valid.replace(b'"alice"', b'"\\ud800"').replace(b'"2"', b'"\\udfff"')
    return "duplicate keys", valid[:-1] + b', "request": {"uid": "dup"}}'


def _pod_of_size(size: int, many: str) -> bytes:
    """A Pod review of exactly ``size`` bytes: many containers, env entries, labels, or one long
    string, padded to the size with an annotation."""
    count = 1000
    for _ in range(2):  # the JSON per item grows a little with its index: aim at 99%, then pad
        count = count * size * 99 // 100 // len(_pod_with(count, many, ""))
    bare = len(_pod_with(count, many, ""))
    return _pod_with(count, many, "x" * (size - bare))


def _pod_with(count: int, many: str, pad: str) -> bytes:
    body = review(0, "CREATE", USERS[0], "fuzz-big")
    obj = body["request"]["object"]
    spec = obj["spec"]
    if many == "containers":
        template = spec["containers"][0]
        spec["containers"] = [{**template, "name": f"c{i}"} for i in range(count)]
    elif many == "env":
        spec["containers"][0]["env"] = [{"name": f"E{i}", "value": "v"} for i in range(count)]
    elif many == "labels":
        obj["metadata"]["labels"] = {f"l{i}": "v" for i in range(count)}
    else:
        obj["metadata"]["labels"] = {"a": "x" * count * 100}
    obj["metadata"]["annotations"] = {"pad": pad}
    return _encode(body)


MANY = ("containers", "env", "labels", "string")
BIG_SIZES = (3 * MIB - 4096, 3 * MIB + 4096, MIB - 4096)


@functools.cache
def heavy(name: str) -> bytes:
    """A large body, built once: building one costs the client more than sending it."""
    if name == "gzip bomb":
        return gzip.compress(b" " * 64 * MIB)
    if name == "deflate bomb":
        return zlib.compress(b'{"a":' + b" " * 64 * MIB, 9)
    dry, many, size = re.fullmatch(r"(dry )?(\w+), (\d+) bytes", name).groups()  # type: ignore[union-attr]
    review = _pod_of_size(int(size), many)
    return _encode({"pod": json.loads(review)["request"]["object"]}) if dry else review


BIG = tuple(f"{dry}{many}, {size} bytes" for dry in ("", "dry ") for many in MANY for size in BIG_SIZES)
HEAVY = ("gzip bomb", "deflate bomb", *BIG)


def _big(rng: random.Random) -> tuple[str, str, bytes]:
    name = f"{rng.choice(MANY)}, {rng.choice(BIG_SIZES)} bytes"
    if rng.random() < 0.2:
        return "/v1/dryrun", name, heavy("dry " + name)
    return rng.choice(ADMISSION_PATHS), name, heavy(name)


def _encoding(rng: random.Random, index: int) -> tuple[str, tuple[tuple[str, str], ...], bytes]:
    valid = _encode(_valid(rng, index))
    kind = rng.randrange(9)
    if kind == 0:
        return "gzip", (("Content-Encoding", "gzip"),), gzip.compress(valid)
    if kind == 1:
        return (
            "gzip bomb",
            (("Content-Encoding", "gzip"),),
            heavy("gzip bomb"),
        )
    if kind == 2:
        return "deflate bomb", (("Content-Encoding", "deflate"),), heavy("deflate bomb")
    if kind == 3:
        return "broken gzip", (("Content-Encoding", "gzip"),), gzip.compress(valid)[: rng.randrange(5, 40)]
    if kind == 4:
        return "not deflate", (("Content-Encoding", "deflate"),), valid
    if kind == 5:
        return "br", (("Content-Encoding", "br"),), rng.randbytes(200)
    if kind == 6:
        return "zstd", (("Content-Encoding", "zstd"),), rng.randbytes(200)
    if kind == 7:
        return (
            "unknown encoding",
            (("Content-Encoding", rng.choice(["x-evil", "gzip, br", "identity"])),),
            valid,
        )
    return "gzip of garbage", (("Content-Encoding", "gzip"),), gzip.compress(rng.randbytes(500))


CONTENT_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=utf-16",
    "application/yaml",
)


def _misc(rng: random.Random, index: int) -> Case:
    valid = _encode(_valid(rng, index))
    kind = rng.randrange(8)
    if kind == 0:
        ctype = rng.choice(CONTENT_TYPES)
        path = rng.choice([*ADMISSION_PATHS, "/v1/dryrun"])
        return Case("misc", f"Content-Type {ctype}", path, valid, headers=(("Content-Type", ctype),))
    if kind == 1:
        return Case(
            "misc", "no Content-Type", rng.choice([*ADMISSION_PATHS, "/v1/dryrun"]), valid, headers=()
        )
    if kind == 2:
        method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
        return Case(
            "misc", f"{method} on a POST path", rng.choice([*ADMISSION_PATHS, "/v1/dryrun"]), b"", method
        )
    if kind == 3:
        path = rng.choice(
            [
                "/",
                "/validate/nope",
                "/v1/dryrun/x",
                "/metrics",
                "/%ff",
                "/validate?x=\u00ff",
                "/" + "a" * 4000,
            ]
        )
        return Case("misc", "unknown path", path, valid)
    if kind == 4:
        return Case(
            "misc",
            "GET on the HTTPS port",
            rng.choice(["/healthz", "/readyz", "/v1/openapi.json"]),
            b"",
            "GET",
            (),
        )
    if kind == 5:
        method, path = rng.choice(
            [("GET", "/metrics"), ("POST", "/metrics"), ("GET", "/"), ("GET", "/healthz")]
        )
        return Case(
            "misc",
            f"{method} {path} on the metrics port",
            path,
            valid if method == "POST" else b"",
            method,
            port="metrics",
        )
    if kind == 6:
        method, path = rng.choice(
            [("POST", "/healthz"), ("GET", "/validate"), ("GET", "/readyz"), ("GET", "/x")]
        )
        return Case(
            "misc",
            f"{method} {path} on the probe port",
            path,
            valid if method == "POST" else b"",
            method,
            port="health",
        )
    headers = (("Content-Type", "application/json"), ("X-Long", "h" * rng.choice([100, 4000, 8000])))
    return Case("misc", "long header", rng.choice(ADMISSION_PATHS), valid, headers=headers)


FAMILIES = (  # (family, weight)
    ("valid", 22), ("mutated", 28), ("cel", 6), ("dryrun", 8), ("bytes", 14), ("big", 1),
    ("encoding", 8), ("misc", 12),
)  # fmt: skip


def case(seed: int, index: int) -> Case:
    """Request ``index`` of the run with ``seed``: the same one every time."""
    rng = random.Random(f"{seed}:{index}")
    family = rng.choices([f for f, _ in FAMILIES], [w for _, w in FAMILIES])[0]
    path = rng.choice(ADMISSION_PATHS)
    if family == "valid":
        body = _valid(rng, index)
        what = f"{body['request']['operation']} {body['request']['kind']['kind']}"
        return Case(family, what, path, _encode(body))
    if family == "mutated":
        what, body = _mutated(rng, index)
        return Case(family, what, path, _encode(body))
    if family == "cel":
        what, body = _cel(rng, index)
        return Case(family, what, rng.choice(["/validate", "/validate/selectors"]), _encode(body))
    if family == "dryrun":
        return _dryrun(rng, index)
    if family == "bytes":
        what, raw = _bytes(rng, index)
        return Case(family, what, rng.choice([*ADMISSION_PATHS, "/v1/dryrun"]), raw)
    if family == "big":
        path, what, raw = _big(rng)
        return Case(family, what, path, raw)
    if family == "encoding":
        what, headers, raw = _encoding(rng, index)
        path = rng.choice([*ADMISSION_PATHS, "/v1/dryrun"])
        return Case(family, what, path, raw, headers=(("Content-Type", "application/json"), *headers))
    return _misc(rng, index)


# --- sending them ----------------------------------------------------------------------------------


@dataclass
class Answer:
    index: int
    family: str
    what: str
    path: str
    seconds: float
    status: int | None  # None: no answer
    error: str = ""
    could_not_process: bool = False
    resent_status: int | None = None


@dataclass
class Tally:
    answers: list[Answer] = field(default_factory=list)

    def add(self, answer: Answer) -> None:
        self.answers.append(answer)

    @property
    def dropped(self) -> list[Answer]:
        return [a for a in self.answers if a.status is None]

    def histogram(self) -> dict[str, dict[str, int]]:
        by: dict[str, Counter[str]] = {}
        for a in self.answers:
            by.setdefault(a.family, Counter())[str(a.status) if a.status is not None else "dropped"] += 1
        return {family: dict(sorted(counts.items())) for family, counts in sorted(by.items())}


async def _send(session: aiohttp.ClientSession, urls: dict[str, str], c: Case) -> tuple[int, bytes]:
    async with session.request(
        c.method, urls[c.port] + c.path, data=c.body or None, headers=dict(c.headers),
        skip_auto_headers=("Content-Type",) if not c.headers else (),
    ) as response:  # fmt: skip
        return response.status, await response.read()


CONNECTION_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)


async def one(index: int, c: Case, session: aiohttp.ClientSession, fresh: Callable[[], aiohttp.ClientSession],
              urls: dict[str, str]) -> Answer:  # fmt: skip
    started = time.perf_counter()
    try:
        status, body = await _send(session, urls, c)
    except CONNECTION_ERRORS as err:
        answer = Answer(index, c.family, c.what, c.path, time.perf_counter() - started, None, repr(err)[:200])
        # Was it the request or the connection? The same request on a connection of its own.
        try:
            async with fresh() as alone:
                answer.resent_status, _ = await _send(alone, urls, c)
        except CONNECTION_ERRORS as again:
            answer.error += f"; re-sent alone: {type(again).__name__}"
        return answer
    seconds = time.perf_counter() - started
    return Answer(
        index, c.family, c.what, c.path, seconds, status, could_not_process=b"could not process" in body
    )


async def load(seed: int, requests: int, concurrency: int, urls: dict[str, str], ca: str,
               progress: Callable[[int], None]) -> Tally:  # fmt: skip
    context = ssl.create_default_context(cafile=ca)
    tally = Tally()
    timeout = aiohttp.ClientTimeout(total=120)
    upcoming = iter(range(requests))

    def fresh() -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, force_close=True), timeout=timeout
        )

    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:

        async def worker() -> None:
            for index in upcoming:
                c = case(seed, index)
                tally.add(await one(index, c, session, fresh, urls))
                progress(len(tally.answers))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return tally


# --- the probe and memory sampler (its own process: the load's client must not delay it) -----------


def sampler(port: int, pid: int, out: Connection, stop: Any) -> None:
    """Every ``PROBE_INTERVAL``: ``GET /healthz`` on a fresh connection (as the kubelet probes), and
    the server's RSS; sends ``(probes, rss)`` when ``stop`` is set."""
    probes: list[tuple[float, float, int]] = []  # (when, seconds, status; 0 = failed)
    rss: list[tuple[float, float]] = []
    start = time.monotonic()
    while not stop.is_set():
        began = time.monotonic()
        status = 0
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/healthz")
            status = conn.getresponse().status
            conn.close()
        except OSError:
            pass
        probes.append((began - start, time.monotonic() - began, status))
        rss.append((began - start, rss_mb(pid)))
        time.sleep(max(0.0, PROBE_INTERVAL - (time.monotonic() - began)))
    out.send((probes, rss))


def rss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    found = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(found.group(1)) / 1024 if found else float("nan")


# --- the server and the report ---------------------------------------------------------------------


def start_server(log_path: str, extra: list[str]) -> tuple[subprocess.Popen[str], dict[str, str], int, str]:
    """``draguard serve --demo`` on free ports, its stderr to ``log_path``: the process, the base URL
    of each port, the probe port, and the CA file."""
    command = [
        sys.executable, "-m", "webhook.cli", "serve", "--demo", "--port", "0", "--metrics-port", "0",
        "--health-port", "0", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    serving = wait_for_line(process, "draguard serving", 120)
    metrics = wait_for_line(process, "metrics at", 10)
    probes = wait_for_line(process, "probes at", 10)
    ca_line = wait_for_line(process, "generated a private CA", 10)
    urls = {
        "https": re.search(r"(https://\S+)", serving).group(1),  # type: ignore[union-attr]
        "metrics": re.search(r"(http://\S+)/metrics", metrics).group(1),  # type: ignore[union-attr]
        "health": re.search(r"(http://\S+)", probes).group(1),  # type: ignore[union-attr]
    }
    ca = ca_line.rsplit(" ", 1)[1].strip()
    return process, urls, int(urls["health"].rsplit(":", 1)[1]), ca


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def log_summary(path: str) -> tuple[dict[str, Any], dict[int, float]]:
    """Lines of the server's log, tracebacks among them, and the most common messages; and the
    server's own latency of each decision by request index (from the handler's start: the rest of
    what the client measured is queueing before the handler, the network and the client itself)."""
    lines = Path(path).read_text(errors="replace").splitlines()
    messages: Counter[str] = Counter()
    tracebacks: Counter[str] = Counter()
    server: dict[int, float] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            messages["(not JSON) " + line[:80]] += 1
            continue
        uid = str(record.get("uid", ""))
        if uid.startswith("fuzz-") and uid[5:].isdigit():
            server[int(uid[5:])] = record["latency_ms"] / 1000
        message = re.sub(r"\d+", "N", str(record.get("message", "")))[:100]
        messages[f"{record.get('logger')}: {message}"] += 1
        if "error" in record and "Traceback" in str(record["error"]):
            tracebacks[
                f"{record.get('logger')}: {message} / {str(record['error']).splitlines()[-1][:100]}"
            ] += 1
    summary = {
        "lines": len(lines),
        "tracebacks": sum(tracebacks.values()),
        "traceback_kinds": dict(tracebacks.most_common(10)),
        "top_messages": dict(messages.most_common(12)),
    }
    return summary, server


def report(tally: Tally, probes: list[tuple[float, float, int]], rss: list[tuple[float, float]],
           seconds: float, logs: dict[str, Any], server: dict[int, float],
           loadavg: tuple[float, float]) -> dict[str, Any]:  # fmt: skip
    answered = [a for a in tally.answers if a.status is not None]
    probe_seconds = [p[1] for p in probes]
    rss_values = [r[1] for r in rss if r[1] == r[1]]
    half = len(rss_values) // 2
    mid, end = (
        (statistics.median(rss_values[half - 5 : half + 5]), statistics.median(rss_values[-10:]))
        if rss_values
        else (0, 0)
    )
    slowest = sorted(answered, key=lambda a: -a.seconds)[:12]
    return {
        "requests": len(tally.answers),
        "seconds": round(seconds, 1),
        "load_average": loadavg,
        "histogram": tally.histogram(),
        "status_5xx": sum(1 for a in answered if (a.status or 0) >= 500),
        "could_not_process": sum(1 for a in answered if a.could_not_process),
        "dropped": [
            {
                "index": a.index,
                "family": a.family,
                "what": a.what,
                "path": a.path,
                "error": a.error,
                "resent": a.resent_status,
            }
            for a in tally.dropped
        ],
        "over_5s": sum(1 for a in answered if a.seconds > SLOW),
        "latency_ms": {
            family: _percentiles([a.seconds for a in answered if family in ("all", a.family)])
            for family in ("all", *tally.histogram())
        },
        "slowest": [
            {
                "seconds": round(a.seconds, 2),
                "index": a.index,
                "family": a.family,
                "what": a.what,
                "path": a.path,
                "status": a.status,
                "server_seconds": round(server[a.index], 2) if a.index in server else None,
            }
            for a in slowest
        ],
        "outside_the_handler_ms": _percentiles(
            [a.seconds - server[a.index] for a in answered if a.index in server]
        ),
        "probe": {
            "samples": len(probes),
            "failed": sum(1 for p in probes if p[2] != 200),
            "p50_ms": round(percentile(probe_seconds, 50) * 1000, 1),
            "p99_ms": round(percentile(probe_seconds, 99) * 1000, 1),
            "max_ms": round(max(probe_seconds, default=float("nan")) * 1000, 1),
            "over_1s": sum(1 for s in probe_seconds if s > 1),
            "over_2s": sum(1 for s in probe_seconds if s > 2),
        },
        "rss_mb": {
            "start": round(rss_values[0], 1) if rss_values else None,
            "middle": round(mid, 1),
            "end": round(end, 1),
            "max": round(max(rss_values, default=0), 1),
            "second_half_growth": round((end - mid) / mid, 3) if mid else None,
            "quarters": [round(statistics.median(q), 1) for q in _quarters(rss_values)],
        },
        "log": logs,
    }


def _percentiles(seconds: list[float]) -> dict[str, float]:
    return {f"p{p}": round(percentile(seconds, p) * 1000, 1) for p in (50, 99)}


def _quarters(values: list[float]) -> list[list[float]]:
    size = len(values) // 4
    return [values[i * size : (i + 1) * size] for i in range(4)] if size else []


def verdicts(r: dict[str, Any]) -> list[tuple[str, bool]]:
    growth, probe = r["rss_mb"]["second_half_growth"], r["probe"]
    probe_text = (
        f"probe p99 {probe['p99_ms']} ms, max {probe['max_ms']} ms, failed {probe['failed']} "
        f"(targets p99 < {PROBE_P99 * 1000:g} ms, none over {PROBE_MAX * 1000:g} ms)"
    )
    probe_ok = probe["p99_ms"] < PROBE_P99 * 1000 and probe["over_2s"] == 0 and probe["failed"] == 0
    return [
        (
            f"server exited during the run: {r['log']['server_exited_during_the_run']}",
            r["log"]["server_exited_during_the_run"] is None,
        ),
        (
            f"server stopped within 30 s of SIGTERM: {r['log']['stopped_on_sigterm']}",
            r["log"]["stopped_on_sigterm"],
        ),
        (f"answers 5xx: {r['status_5xx']} (target 0)", r["status_5xx"] == 0),
        (f"'could not process': {r['could_not_process']} (target 0)", r["could_not_process"] == 0),
        (f"dropped connections: {len(r['dropped'])} (target 0)", not r["dropped"]),
        (f"answers over {SLOW:g} s: {r['over_5s']} (target 0)", r["over_5s"] == 0),
        (probe_text, probe_ok),
        (
            f"RSS second-half growth {growth} (target within {RSS_GROWTH:g})",
            growth is not None and abs(growth) <= RSS_GROWTH,
        ),
    ]


def print_report(r: dict[str, Any]) -> None:
    print(f"{r['requests']} requests in {r['seconds']} s; load average before/after {r['load_average']}")
    print("status by family:")
    for family, counts in r["histogram"].items():
        print(f"  {family:<9} " + "  ".join(f"{status}: {n}" for status, n in counts.items()))
    print("latency p50/p99 ms by family:")
    for family, at in r["latency_ms"].items():
        print(f"  {family:<9} {at['p50']:8.1f} {at['p99']:8.1f}")
    print("slowest answers:")
    for s in r["slowest"]:
        print(
            f"  {s['seconds']:7.2f} s (server {s['server_seconds']} s)  #{s['index']} {s['family']} ", end=""
        )
        print(f"{s['path']} -> {s['status']}: {s['what']}")
    gap = r["outside_the_handler_ms"]
    print(f"time outside the server's handler (decisions), p50 {gap['p50']} ms, p99 {gap['p99']} ms")
    for d in r["dropped"][:20]:
        print(f"  dropped #{d['index']} {d['family']} {d['path']} ({d['what']}): {d['error']}")
        print(f"    re-sent on a connection of its own: {d['resent']}")
    p, m = r["probe"], r["rss_mb"]
    print(f"probe /healthz: {p['samples']} samples, p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms")
    print(f"  max {p['max_ms']} ms, {p['over_1s']} over 1 s, {p['over_2s']} over 2 s, {p['failed']} failed")
    print(f"RSS MB: start {m['start']}, quarters {m['quarters']}, middle {m['middle']}, end {m['end']}")
    print(f"server log: {r['log']['lines']} lines, {r['log']['tracebacks']} tracebacks")
    for kind, n in r["log"]["traceback_kinds"].items():
        print(f"  traceback x{n}: {kind}")
    for message, n in r["log"]["top_messages"].items():
        print(f"  x{n}: {message}")
    print("targets:")
    for text, ok in verdicts(r):
        print(f"  {'ok  ' if ok else 'MISS'} {text}")


def run(seed: int, requests: int, concurrency: int, extra: list[str]) -> dict[str, Any]:
    if requests >= 2000:  # built before the clock starts, or the first of each stalls every request
        for name in HEAVY:
            heavy(name)
    # This client imports draguard's modules (for the demo objects and the paths): a full garbage
    # collection walks them all and stalls every request in flight.
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="draguard-fuzz-") as tmp:
        log_path = os.path.join(tmp, "server.log")
        process, urls, probe_port, ca = start_server(log_path, extra)
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        stop = context.Event()
        probe = context.Process(target=sampler, args=(probe_port, process.pid, send, stop), daemon=True)
        loadavg = os.getloadavg()[0]
        started = time.perf_counter()
        probe.start()
        step = max(1, requests // 20)

        def progress(done: int) -> None:
            if requests >= 2000 and done % step == 0:
                print(
                    f"  {done} requests, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True
                )

        try:
            tally = asyncio.run(load(seed, requests, concurrency, urls, ca, progress))
        finally:
            seconds = time.perf_counter() - started
            stop.set()
            probes, rss = receive.recv() if receive.poll(30) else ([], [])
            probe.join(timeout=5)
            exited = process.poll()  # None: still serving, as it should be
            process.terminate()
            try:
                process.wait(timeout=30)
                stopped = True
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                stopped = False
        summary, server = log_summary(log_path)
        logs = {
            **summary,
            "server_exited_during_the_run": exited,
            "stopped_on_sigterm": stopped,
        }
        if exited is not None:
            print(f"the server exited with {exited} during the run; the end of its log:", file=sys.stderr)
            print("\n".join(Path(log_path).read_text(errors="replace").splitlines()[-15:]), file=sys.stderr)
    return report(
        tally, probes, rss, seconds, logs, server, (round(loadavg, 1), round(os.getloadavg()[0], 1))
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="the short seeded run of the test suite")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--show", type=int, metavar="INDEX", help="print request INDEX of the seed and exit")
    parser.add_argument("server_args", nargs="*", help="after --: more flags for draguard serve")
    args = parser.parse_args()
    if args.show is not None:
        c = case(args.seed, args.show)
        print(c.family, c.what, c.method, c.path, c.headers, c.port, len(c.body), c.body[:2000])
        return 0
    requests, concurrency = (400, 8) if args.quick else (args.requests, args.concurrency)
    result = run(args.seed, requests, concurrency, args.server_args)
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if all(ok for _, ok in verdicts(result)) else 1


if __name__ == "__main__":
    sys.exit(main())
