"""draguard deployed on the real control plane the way the Helm chart deploys it, minus the Pod.

The chart is rendered with ``webhooks.url`` pointing at this machine; its ServiceAccount, RBAC
objects, ConfigMaps and webhook configurations are applied to the real API server; each replica is
``draguard serve --kubeconfig`` with a TokenRequest token of the chart's ServiceAccount, so it has
exactly the permissions the chart grants (a permission the chart forgot fails a test).

Two things a cluster would provide are stood in for here, because nothing here runs pods:
- the kubelet's Secret volume (:class:`SecretVolume`): the elected replica writes the serving
  certificate into a Secret, and every replica reads it from a directory the kubelet keeps in sync;
- the Service (:class:`Balancer`): one address in front of the replicas, connections spread over
  the ones that are up, none accepted when all are down.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml
from controlplane import Component, ControlPlane, _die_with_parent, cannot_run, free_port, wait_for
from kubernetes import client, dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "charts"))

from helm_render import HELM_MISSING, NAMESPACE, deadline_args, render

RELEASE = "draguard"
# What a pod of the chart's Deployment would be given; the Deployment and the Service are not applied.
APPLIED_KINDS = (
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
)
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


class SecretVolume:
    """The kubelet's part: keep a directory in step with a ``kubernetes.io/tls`` Secret.

    Like the kubelet's atomic writer, a new version is written into a fresh directory and swapped
    in by renaming one symlink, so a reader never sees a new certificate with an old key.
    """

    def __init__(self, api: client.ApiClient, namespace: str, name: str, directory: Path) -> None:
        self._core = client.CoreV1Api(api)
        self._namespace, self._name, self.directory = namespace, name, directory
        self._stop = threading.Event()
        self._seen: dict[str, str] | None = None
        self._thread = threading.Thread(target=self._run, name="secret-volume", daemon=True)
        directory.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            # The API server may be away (a test restarts it): the kubelet retries, so does this.
            with contextlib.suppress(client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError):
                secret = self._core.read_namespaced_secret(self._name, self._namespace)
                data = dict(secret.data or {})
                if data != self._seen:
                    self._write(data)
                    self._seen = data

    def _write(self, data: Mapping[str, str]) -> None:
        version = Path(tempfile.mkdtemp(prefix="..", dir=self.directory))
        for key, value in data.items():
            (version / key).write_bytes(base64.b64decode(value))
        link = self.directory / "..data_tmp"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(version.name)
        link.replace(self.directory / "..data")
        for key in data:
            target = self.directory / key
            if not target.is_symlink():
                target.symlink_to(Path("..data") / key)


class Balancer:
    """The Service's part: accept on one port, forward each connection to a replica that is up.

    Connections are spread round-robin; a replica that refuses is skipped; with none up the client
    connection is closed at once, as a Service without ready endpoints refuses it.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.backends: list[int] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self._turn = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="balancer", daemon=True)
        self.connections = 0
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed = True
        # close() alone does not wake a thread blocked in accept(); shutdown() does (on Linux).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = self._connect()
            if upstream is None:
                downstream.close()
                continue
            self.connections += 1
            for end in (downstream, upstream):
                # as kube-proxy forwards in the kernel: Nagle's algorithm in a user-space relay held a
                # request's second segment back until the first was acknowledged (40 ms, delayed ACK)
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._open_lock:
                self._open.update((downstream, upstream))
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        _pipe(source, sink)
        with self._open_lock:
            self._open.discard(source)

    def cut(self) -> int:
        """Reset every connection relayed now, both ends, as a network partition or a restarted
        load balancer does (new connections are accepted as before); how many were cut."""
        with self._open_lock:
            cut, self._open = self._open, set()
        for end in cut:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        return len(cut) // 2

    def _connect(self) -> socket.socket | None:
        backends = list(self.backends)
        for _ in backends:
            self._turn = (self._turn + 1) % len(backends)
            with contextlib.suppress(OSError):
                upstream = socket.create_connection(("127.0.0.1", backends[self._turn]), timeout=2)
                # The timeout was for connecting only: left on the socket, it cut every answer that
                # took longer than 2 s (and every idle keep-alive connection), which the API server
                # reports as "failed to call webhook: EOF".
                upstream.settimeout(None)
                return upstream
        return None


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            source.close()


@dataclass
class Replica:
    """One ``draguard serve`` process with the ports it listens on."""

    name: str
    port: int
    metrics_port: int
    health_port: int
    component: Component | None = None

    def get(self, path: str, metrics: bool = False, timeout: float = 5) -> tuple[int, str]:
        import http.client

        port = self.metrics_port if metrics else self.health_port
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    @property
    def running(self) -> bool:
        return self.component is not None and self.component.process.poll() is None

    def snapshot_objects(self, kind: str) -> int:
        """How many objects of ``kind`` its snapshot holds (its ``draguard_snapshot_objects``
        metric): the snapshot follows the API server asynchronously, and this shows how far."""
        status, text = self.get("/metrics", metrics=True)
        assert status == 200, text
        found = re.search(rf'^draguard_snapshot_objects\{{kind="{kind}"\}} (\S+)$', text, re.MULTILINE)
        return int(float(found[1])) if found else 0


@dataclass
class Draguard:
    """draguard installed from the chart on ``plane`` with ``values``, served by ``replicas`` processes."""

    plane: ControlPlane
    values: Mapping[str, Any] = field(default_factory=dict)
    replicas: int = 1
    # More ``draguard serve`` flags, for what the chart does not set (``--dryrun-client-ca``).
    args: Sequence[str] = ()
    # Where the replicas reach the API server, when not directly (a relay whose connections the
    # soak cuts: benchmarks/soak.py).
    api_url: str = ""
    objects: list[dict[str, Any]] = field(init=False, default_factory=list)
    replica: list[Replica] = field(init=False, default_factory=list)
    workdir: Path = field(init=False)
    balancer: Balancer = field(init=False)
    _volume: SecretVolume = field(init=False)
    _kubeconfig: Path = field(init=False)
    # The rendered Deployment's --deadline flags: what the container would be started with.
    _deadlines: list[str] = field(init=False, default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.balancer.port}"

    def install(self) -> None:
        """Apply the chart's objects, start the replicas and wait until the API server can call them."""
        if HELM_MISSING:
            cannot_run(HELM_MISSING)
        self.workdir = Path(tempfile.mkdtemp(prefix="draguard-e2e-", dir=self.plane.workdir))
        self.balancer = Balancer(free_port())
        values = _merge({"webhooks": {"url": self.url}}, self.values)
        rendered = render(dict(values))
        self.objects = [_as_manifest(o) for o in rendered if o["kind"] in APPLIED_KINDS]
        self._deadlines = deadline_args(rendered)
        api = self.plane.client()
        core = client.CoreV1Api(api)
        with contextlib.suppress(client.ApiException):  # already there from an earlier install
            core.create_namespace({"metadata": {"name": NAMESPACE}})
        apply(api, self.objects)
        self._kubeconfig = self.plane.kubeconfig(token=self._token(), name="draguard", server=self.api_url)
        (self.workdir / "config.yaml").write_text(self._config_text())
        self._volume = SecretVolume(api, NAMESPACE, f"{RELEASE}-tls", self.workdir / "tls")
        self._volume.start()
        self.balancer.start()
        for i in range(self.replicas):
            self.replica.append(Replica(f"{RELEASE}-{i}", free_port(), free_port(), free_port()))
            self.start_replica(i)
        for i in range(self.replicas):
            self.wait_ready(i)
        wait_for("the caBundle in every webhook configuration", self._ca_injected, timeout=60)

    def uninstall(self) -> None:
        """Stop the replicas and delete what was applied, webhook configurations first (they would
        send every later request of the test session to a draguard that is gone); then what draguard
        made itself, as the chart README tells an admin to after ``helm uninstall``: the next install
        of the session must not inherit a CA a module made to live 30 s."""
        api = self.plane.client()
        admission = client.AdmissionregistrationV1Api(api)
        hooks = [o for o in self.objects if o["kind"] in WEBHOOK_KINDS]
        for obj in hooks:
            with contextlib.suppress(client.ApiException):
                _delete(api, admission, obj)
        # With the webhooks gone nothing calls the replicas again: they are killed rather than left
        # to drain the API server's idle connections for 5 s each (stop_replica, which tests use,
        # stops a replica as the kubelet does).
        self.balancer.backends = []
        for replica in self.replica:
            if replica.component is not None:
                replica.component.stop(grace=0)
        for obj in [o for o in self.objects if o["kind"] not in WEBHOOK_KINDS]:
            with contextlib.suppress(client.ApiException):
                _delete(api, admission, obj)
        core = client.CoreV1Api(api)
        for secret in (f"{RELEASE}-ca", f"{RELEASE}-tls"):
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_secret(secret, NAMESPACE)
        with contextlib.suppress(client.ApiException):
            client.CoordinationV1Api(api).delete_namespaced_lease(f"{RELEASE}-certs", NAMESPACE)
        with contextlib.suppress(AttributeError):
            self._volume.stop()
            self.balancer.close()

    def start_replica(self, i: int) -> None:
        replica = self.replica[i]
        log = self.workdir / f"{replica.name}.log"
        env = {**os.environ, "POD_NAME": replica.name, "POD_NAMESPACE": NAMESPACE}
        with log.open("ab") as out:
            process = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "draguard"),
                    "serve",
                    f"--kubeconfig={self._kubeconfig}",
                    f"--config={self.workdir / 'config.yaml'}",
                    f"--cert-dir={self._volume.directory}",
                    "--host=127.0.0.1",
                    f"--port={replica.port}",
                    f"--metrics-port={replica.metrics_port}",
                    f"--health-port={replica.health_port}",
                    *self._deadlines,
                    *self.args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        replica.component = Component(replica.name, process, log)
        self.balancer.backends = [r.port for r in self.replica if r.running]

    def stop_replica(self, i: int) -> None:
        """Stop a replica as the kubelet stops the chart's pod: out of the Service's endpoints first
        (the chart's preStop sleep waits for that), then SIGTERM. Connections already open to it
        stay open until it closes them, as they do through kube-proxy."""
        replica = self.replica[i]
        self.balancer.backends = [r.port for r in self.replica if r.running and r is not replica]
        if replica.component is not None:
            replica.component.stop()

    def stop_replicas(self) -> None:
        """Stop every replica at once, as the kubelet stops a Deployment's pods scaled to zero: all
        out of the Service's endpoints, SIGTERM to each, then wait for each. One after another,
        each drained the API server's idle connections for its own 5 s in turn
        (``webhook.server.DRAIN_SECONDS``)."""
        self.balancer.backends = []
        stopping = [r.component for r in self.replica if r.running and r.component is not None]
        for component in stopping:
            component.process.terminate()
        for component in stopping:
            component.stop()

    def wait_ready(self, i: int, timeout: float = 60) -> None:
        replica = self.replica[i]

        def ready() -> bool:
            assert replica.running, f"{replica.name} exited:\n{self.log(i)}"
            with contextlib.suppress(OSError):
                return replica.get("/readyz")[0] == 200
            return False

        wait_for(f"{replica.name} to be ready", ready, timeout=timeout)

    def ca_bundle(self) -> bytes:
        """The CA the API server trusts draguard with (the caBundle the elected replica injected)."""
        admission = client.AdmissionregistrationV1Api(self.plane.client())
        config = admission.read_validating_webhook_configuration(RELEASE)
        return base64.b64decode(config.webhooks[0].client_config.ca_bundle)

    def log(self, i: int) -> str:
        replica = self.replica[i]
        return replica.component.tail(60) if replica.component else ""

    def _token(self) -> str:
        return self.plane.service_account_token(NAMESPACE, RELEASE, seconds=3600 * 6)

    def _config_text(self) -> str:
        maps = [o for o in self.objects if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})]
        assert len(maps) == 1, "the chart renders one config ConfigMap"
        text: str = maps[0]["data"]["config.yaml"]
        return text

    def _ca_injected(self) -> bool:
        admission = client.AdmissionregistrationV1Api(self.plane.client())
        for obj in self.objects:
            if obj["kind"] == "ValidatingWebhookConfiguration":
                found = admission.read_validating_webhook_configuration(obj["metadata"]["name"])
            elif obj["kind"] == "MutatingWebhookConfiguration":
                found = admission.read_mutating_webhook_configuration(obj["metadata"]["name"])
            else:
                continue
            if not all(w.client_config.ca_bundle for w in found.webhooks):
                return False
        return True


class Endpoints:
    """The endpoints controller's part, for the :class:`Balancer` in front of ``draguard``'s replicas:
    a replica gets new connections only while its readiness probe passes, as a Service's
    EndpointSlice follows its pods' Ready condition. The probe is the chart's (``/readyz`` on the
    health port, timeout 2 s, out after 2 failures in a row, back after one success), run every
    ``period`` seconds (the chart's 5 s, or less to fail over sooner). Used by the soak
    (``benchmarks/soak.py``), where replicas are stopped and killed under traffic."""

    def __init__(
        self, draguard: Draguard, period: float = 5.0, timeout: float = 2.0, failures: int = 2
    ) -> None:
        self._draguard = draguard
        self._period, self._timeout, self._failures = period, timeout, failures
        self._failed: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="endpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _ready(self, replica: Replica) -> bool:
        if not replica.running:
            self._failed[replica.name] = self._failures
            return False
        try:
            passed = replica.get("/readyz", timeout=self._timeout)[0] == 200
        except OSError:
            passed = False
        self._failed[replica.name] = 0 if passed else self._failed.get(replica.name, 0) + 1
        return self._failed[replica.name] < self._failures

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            ready = [r.port for r in list(self._draguard.replica) if self._ready(r)]
            self._draguard.balancer.backends = ready


def _delete(
    api: client.ApiClient, admission: client.AdmissionregistrationV1Api, obj: Mapping[str, Any]
) -> None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace", NAMESPACE)
    if kind == "ValidatingWebhookConfiguration":
        admission.delete_validating_webhook_configuration(name)
    elif kind == "MutatingWebhookConfiguration":
        admission.delete_mutating_webhook_configuration(name)
    elif kind in ("ClusterRole", "ClusterRoleBinding"):
        rbac = client.RbacAuthorizationV1Api(api)
        (rbac.delete_cluster_role if kind == "ClusterRole" else rbac.delete_cluster_role_binding)(name)
    elif kind in ("Role", "RoleBinding"):
        rbac = client.RbacAuthorizationV1Api(api)
        (rbac.delete_namespaced_role if kind == "Role" else rbac.delete_namespaced_role_binding)(
            name, namespace
        )
    else:
        core = client.CoreV1Api(api)
        delete = {
            "ServiceAccount": core.delete_namespaced_service_account,
            "ConfigMap": core.delete_namespaced_config_map,
        }[kind]
        delete(name, namespace)


def _as_manifest(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered object as the chart's manifest had it: without what the rendering server set."""
    server_set = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
    metadata = {k: v for k, v in obj["metadata"].items() if k not in server_set}
    return {**obj, "metadata": metadata}


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@contextlib.contextmanager
def installed(
    plane: ControlPlane, values: Mapping[str, Any], replicas: int = 1, args: Sequence[str] = ()
) -> Iterator[Draguard]:
    """draguard installed for the length of a ``with`` block (usually a module-scoped fixture)."""
    deployment = Draguard(plane, values, replicas, args)
    try:
        deployment.install()
        yield deployment
    finally:
        deployment.uninstall()


def apply(api: client.ApiClient, documents: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Create every object of a YAML text (or a list of objects) as ``kubectl create`` would: as
    JSON, so fields the ``kubernetes`` client's models do not know (alpha fields such as a device's
    ``nodeAllocatableResourceMappings``) reach the API server. Returns the objects as created."""
    objects = list(yaml.safe_load_all(documents)) if isinstance(documents, str) else list(documents)
    resources = dynamic.DynamicClient(api).resources
    created = []
    for obj in objects:
        if obj:
            resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            namespace = obj["metadata"].get("namespace") if resource.namespaced else None
            created.append(resource.create(body=dict(obj), namespace=namespace).to_dict())
    return created


def remove(api: client.ApiClient, objects: Sequence[Mapping[str, Any]]) -> None:
    """Delete objects made with :func:`apply` (or by hand), newest first, as ``kubectl delete`` would;
    objects already gone are fine."""
    resources = dynamic.DynamicClient(api).resources
    for obj in reversed(objects):
        metadata = obj["metadata"]
        resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        with contextlib.suppress(client.ApiException):
            resource.delete(name=metadata["name"], namespace=metadata.get("namespace"))
