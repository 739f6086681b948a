"""A small in-memory stand-in for kube-apiserver on 127.0.0.1, for tests only.

Everything that can talk to the real API server does (``tests/kube``: etcd and kube-apiserver
1.36); this stays for the two things it cannot do for us:

* render the chart: Helm (helm-sdkpy) has no client-only template action, so ``helm_render.py``
  installs the chart here and reads back what Helm created, on machines without the Kubernetes
  binaries too;
* fail one particular write on demand: ``tests/webhook/ledger_standin.py`` adds dropped, lost and
  delayed ConfigMap writes for the quota ledger's fault tests.

It is faithful where those depend on the API server's behaviour; the upstream source is cited for
each point:

* optimistic concurrency: an update whose ``metadata.resourceVersion`` differs from the stored
  one fails with 409 Conflict and the upstream message
  (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go,
  staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go);
* an update *without* resourceVersion is refused (422) for kinds whose strategy disallows
  unconditional updates (webhook configurations), and allowed for Secrets and ConfigMaps
  (pkg/registry/*/strategy.go ``AllowUnconditionalUpdate``); PUT never creates;
* create of an existing name is 409 AlreadyExists; reads of a missing name are 404 NotFound;
  errors are ``metav1.Status`` objects;
* ``Secret.data`` and webhook ``caBundle`` must be base64 (they are ``[]byte`` in Go);
* list with an equality ``labelSelector``, ``/version`` and the discovery documents, enough for
  Helm's REST mapper.

It is not an API server: no admission, no defaulting beyond metadata, no watch, no auth.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
import http.server
import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    unconditional_update: bool = True

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _r(gv: str, plural: str, kind: str, namespaced: bool = True, **flags: bool) -> Resource:
    group, _, version = gv.rpartition("/")
    return Resource(group, version, plural, kind, namespaced, **flags)


RESOURCES = [
    _r("v1", "namespaces", "Namespace", namespaced=False),
    _r("v1", "secrets", "Secret"),
    _r("v1", "configmaps", "ConfigMap"),
    _r("v1", "services", "Service"),
    _r("v1", "serviceaccounts", "ServiceAccount"),
    _r("v1", "pods", "Pod"),
    _r("apps/v1", "deployments", "Deployment"),
    _r("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    _r("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy"),
    _r("batch/v1", "jobs", "Job"),
    _r("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False),
    _r("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _r("rbac.authorization.k8s.io/v1", "roles", "Role"),
    _r("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    _r(
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
        unconditional_update=False,
    ),
    _r(
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
        unconditional_update=False,
    ),
    _r("monitoring.coreos.com/v1", "servicemonitors", "ServiceMonitor"),
    _r("monitoring.coreos.com/v1", "prometheusrules", "PrometheusRule"),
    _r("cert-manager.io/v1", "certificates", "Certificate"),
    _r("cert-manager.io/v1", "issuers", "Issuer"),
]


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message; varints as int, length-delimited as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            yield number, buf[i : i + size]
            i += size
        else:
            raise ApiError(
                415, "UnsupportedMediaType", f"protobuf wire type {wire} is not understood by the stand-in"
            )


def _map_entry(entry: bytes) -> tuple[str, bytes]:
    parts = dict(_fields(entry))
    key, value = parts.get(1, b""), parts.get(2, b"")
    assert isinstance(key, bytes) and isinstance(value, bytes)
    return key.decode(), value


def decode_protobuf_secret(body: bytes) -> dict[str, Any]:
    """The JSON form of a Secret sent as ``application/vnd.kubernetes.protobuf``.

    client-go sends core types as protobuf (Helm's release storage writes Secrets this way) and
    does not fall back to JSON. Only the fields of Secret and ObjectMeta that matter here are
    read (numbers from k8s.io/api/core/v1/generated.proto and apimachinery meta/v1): the
    envelope is the magic ``k8s\\0`` followed by a runtime.Unknown whose ``raw`` is the Secret.
    """
    if not body.startswith(b"k8s\x00"):
        raise ApiError(400, "BadRequest", "protobuf body without the k8s envelope")
    raw = dict(_fields(body[4:])).get(2, b"")
    assert isinstance(raw, bytes)
    metadata: dict[str, Any] = {}
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata}
    for number, value in _fields(raw):
        if number == 1 and isinstance(value, bytes):
            for field, item in _fields(value):
                names = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
                if field in names and isinstance(item, bytes):
                    metadata[names[field]] = item.decode()
                elif field in (11, 12) and isinstance(item, bytes):
                    key, text = _map_entry(item)
                    metadata.setdefault("labels" if field == 11 else "annotations", {})[key] = text.decode()
        elif number == 2 and isinstance(value, bytes):
            key, data = _map_entry(value)
            secret.setdefault("data", {})[key] = base64.b64encode(data).decode()
        elif number == 3 and isinstance(value, bytes):
            secret["type"] = value.decode()
        elif number == 5:
            secret["immutable"] = bool(value)
    return secret


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


Key = tuple[Resource, str, str]  # resource, namespace ("" for cluster scope), name


class Store:
    """Objects by key, each with the resourceVersion the last write gave it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, dict[str, Any]] = {}
        self._version = 100

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.objects.get((resource, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def put(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as written by someone else (a test playing another client)."""
        with self.lock:
            obj = copy.deepcopy(obj)
            obj.setdefault("apiVersion", resource.group_version)
            obj.setdefault("kind", resource.kind)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            if namespace:
                meta["namespace"] = namespace
            meta["resourceVersion"] = self.next_version()
            self.objects[(resource, namespace, meta["name"])] = obj
            return copy.deepcopy(obj)

    def of(self, resource: Resource) -> list[dict[str, Any]]:
        with self.lock:
            return [
                copy.deepcopy(o) for (r, _, _), o in sorted(self.objects.items(), key=_order) if r == resource
            ]


def _order(item: tuple[Key, dict[str, Any]]) -> tuple[str, str]:
    (_, namespace, name), _ = item
    return namespace, name


def _not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource.qualified} "{name}" not found')


def _invalid(resource: Resource, name: str, detail: str) -> ApiError:
    return ApiError(422, "Invalid", f'{resource.qualified_kind} "{name}" is invalid: {detail}')


def _check_bytes(resource: Resource, name: str, path: str, value: Any) -> None:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ApiError(400, "BadRequest", f"{path}: illegal base64 data in {resource.kind} {name}") from None


def _validate(resource: Resource, obj: dict[str, Any]) -> None:
    name = obj.get("metadata", {}).get("name") or ""
    if not name:
        raise _invalid(resource, name, "metadata.name: Required value: name or generateName is required")
    if resource.kind == "Secret":
        for key, value in (obj.get("data") or {}).items():
            _check_bytes(resource, name, f"data[{key}]", value)
    if resource.kind.endswith("WebhookConfiguration"):
        for i, hook in enumerate(obj.get("webhooks") or []):
            bundle = (hook.get("clientConfig") or {}).get("caBundle")
            if bundle is not None:
                _check_bytes(resource, name, f"webhooks[{i}].clientConfig.caBundle", bundle)


class Apiserver:
    """The HTTP side. ``requests`` records (method, path) of every call, for assertions."""

    def __init__(self) -> None:
        self.store = Store()
        self.requests: list[tuple[str, str]] = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def resource(self, kind: str) -> Resource:
        return next(r for r in RESOURCES if r.kind == kind)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- routing -----------------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, Any]:
        self.requests.append((method, raw_path))
        url = urlsplit(raw_path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            return self._route(method, url.path.rstrip("/"), query, body)
        except ApiError as err:
            return err.code, err.status()

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
        if path == "/version":
            return 200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64"}
        discovery = self._discovery(path)
        if discovery is not None:
            return 200, discovery
        resource, namespace, name = self._parse(path)
        with self.store.lock:
            if method == "GET" and name:
                found = self.store.get(resource, namespace, name)
                if found is None:
                    raise _not_found(resource, name)
                return 200, found
            if method == "GET":
                return 200, self._list(resource, namespace, query.get("labelSelector", ""))
            obj = json.loads(body or b"{}")
            if method == "POST":
                return 201, self._create(resource, namespace, obj)
            if method == "PUT":
                return self._replace(resource, namespace, name, obj)
            if method == "DELETE":
                if self.store.objects.pop((resource, namespace, name), None) is None:
                    raise _not_found(resource, name)
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported by the stand-in")

    def _parse(self, path: str) -> tuple[Resource, str, str]:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], (rest[1] if len(rest) > 1 else "")
        for r in RESOURCES:
            if (r.group, r.version, r.plural) == (group, version, plural) and r.namespaced == bool(namespace):
                return r, namespace, name
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")

    def _list(self, resource: Resource, namespace: str, selector: str) -> dict[str, Any]:
        wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
        items = []
        for (r, ns, _), obj in sorted(self.store.objects.items(), key=_order):
            labels = obj["metadata"].get("labels") or {}
            matches = all(labels.get(k) == v for k, v in wanted.items())
            if r == resource and (not namespace or ns == namespace) and matches:
                items.append(copy.deepcopy(obj))
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": str(self.store._version)},
            "items": items,
        }

    def _create(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        _validate(resource, obj)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")
        if self.store.get(resource, namespace, meta["name"]) is not None:
            raise ApiError(409, "AlreadyExists", f'{resource.qualified} "{meta["name"]}" already exists')
        return self.store.put(resource, namespace, obj)

    def _replace(self, resource: Resource, namespace: str, name: str, obj: dict[str, Any]) -> tuple[int, Any]:
        _validate(resource, obj)
        current = self.store.get(resource, namespace, name)
        wanted = obj["metadata"].get("resourceVersion")
        if current is None:
            raise _not_found(resource, name)
        if not wanted and not resource.unconditional_update:
            raise _invalid(
                resource, name, "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
            )
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource.qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        obj["metadata"]["uid"] = current["metadata"]["uid"]
        obj["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        return 200, self.store.put(resource, namespace, obj)

    # -- discovery (legacy, unaggregated documents; clients fall back to them) -----------------

    def _discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for r in RESOURCES:
                if r.group and r.version not in groups.setdefault(r.group, []):
                    groups[r.group].append(r.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in groups.items()
                ],
            }
        match = re.fullmatch(r"/api/v1|/apis/([^/]+)/([^/]+)", path)
        if match is None:
            return None
        group_version = "v1" if path == "/api/v1" else f"{match[1]}/{match[2]}"
        listed = [r for r in RESOURCES if r.group_version == group_version]
        if not listed:
            return None
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [
                {
                    "name": r.plural,
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": verbs,
                }
                for r in listed
            ],
        }

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        apiserver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes; no 40 ms stall

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if "protobuf" in (self.headers.get("Content-Type") or ""):
                    body = json.dumps(decode_protobuf_secret(body)).encode()
                code, payload = apiserver.handle(self.command, self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def running() -> Iterator[Apiserver]:
    server = Apiserver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
