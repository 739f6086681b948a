"""A real Kubernetes control plane for the tests: etcd and kube-apiserver, kube-scheduler and
kube-controller-manager on demand.

Stand-ins only check that draguard agrees with our own reading of the protocol; the real API server
sends its own AdmissionReviews, evaluates matchConditions in its own CEL, enforces RBAC, answers
watches with its own bookmarks and 410s and serialises writes with real resourceVersions.

The binaries are found the way controller-runtime's envtest finds them: in the directory named by
``KUBEBUILDER_ASSETS`` (``.ci/run`` unpacks ``../shared/k8s`` there). Binaries from ``setup-envtest``
have no scheduler or controller-manager; the tests that need those skip on them.

Everything binds to 127.0.0.1 on free ports, with throw-away PKI and data in a temporary directory,
so two test runs (or a test run and a person's cluster) never collide. Each process is started in
its own session and asked to die with the test process (``PR_SET_PDEATHSIG``), so not even a
``kill -9`` of pytest leaves one behind; :meth:`ControlPlane.stop` stops exactly what it started.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime as dt
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from kubernetes import client

from certs.material import KeyAlgorithm, KeyPair, generate_ca, issue_client, issue_serving

ASSETS_VAR = "KUBEBUILDER_ASSETS"
CORE_BINARIES = ("etcd", "kube-apiserver")
# The issuer and audience of the service-account tokens the API server signs.
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
START_TIMEOUT = 120.0
# One count of kube-scheduler's event-handling histogram (see ControlPlane.scheduler_events).
SCHEDULER_EVENT_COUNT = re.compile(
    r'^scheduler_event_handling_duration_seconds_count\{event="([^"]+)"\} (\S+)$', re.M
)
# The one --runtime-config entry a 1.36 server needs to serve DeviceTaintRule (v1beta2), with its gate.
DEVICE_TAINT_RULES = "resource.k8s.io/v1beta2/devicetaintrules=true"
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(Exception):
    """A component did not start; the message ends with the tail of its log."""


def missing_binaries(names: Sequence[str] = CORE_BINARIES) -> str:
    """Why the control plane cannot run here (one line), or "" when it can."""
    assets = os.environ.get(ASSETS_VAR, "")
    how = (
        f"set {ASSETS_VAR} to a directory holding {', '.join(names)} "
        "(.ci/run unpacks ../shared/k8s/*.tar.xz and sets it)"
    )
    if not assets:
        return f"no real control plane: {how}"
    absent = [n for n in names if not os.access(Path(assets, n), os.X_OK)]
    if absent:
        return f"no real control plane: {', '.join(absent)} not in {assets}; {how}"
    return ""


def cannot_run(reason: str) -> None:
    """A test whose real part is missing here: skipped, saying ``reason``, except under CI
    (``CI=true``), where every part must be there and a skip would hide that it is not."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A port nothing listens on right now (the kernel's choice, so two runs do not collide)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child before exec: be killed when the test process dies, however it dies. SIGKILL,
    not SIGTERM: etcd goes at once, and kube-apiserver's graceful shutdown then never ends (it
    was left running, without its etcd, after every killed test run)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class Component:
    """One running binary, its log, and how to stop it."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int = 0  # a controller's secure port (its /healthz, /readyz and /metrics)

    def tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 15.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _ssl_context(ca_file: Path | None, cert: tuple[Path, Path] | None) -> ssl.SSLContext:
    if ca_file is None:
        context = ssl._create_unverified_context()  # a component's own self-signed health endpoint
    else:
        context = ssl.create_default_context(cafile=str(ca_file))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def https_get(port: int, path: str, context: ssl.SSLContext, timeout: float = 5.0) -> tuple[int, str]:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.read().decode(errors="replace")
    finally:
        connection.close()


@dataclass
class ControlPlane:
    """etcd and kube-apiserver 1.36 with throw-away PKI; the scheduler and controller-manager on demand.

    ``feature_gates`` go to every component, on top of the 1.36 defaults (DRA is GA; its beta
    gates are on). A test that needs an off-by-default gate says so where it asks for one.
    """

    assets: Path
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: Sequence[str] = ()
    # kube-apiserver's --allow-privileged (its default, False, refuses privileged containers; kubeadm
    # and kind set it).
    allow_privileged: bool = False
    workdir: Path = field(init=False)
    url: str = field(init=False, default="")
    port: int = field(init=False, default=0)
    etcd_url: str = field(init=False, default="")
    _etcd_peer: str = field(init=False, default="")
    ca_file: Path = field(init=False)
    admin_kubeconfig: Path = field(init=False)
    _ca: KeyPair = field(init=False)
    _components: dict[str, Component] = field(init=False, default_factory=dict)
    _users: dict[tuple[str, tuple[str, ...]], tuple[Path, Path]] = field(init=False, default_factory=dict)
    _users_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start etcd and kube-apiserver; on any failure, stop what was started and raise."""
        # etcd fsyncs every write: tmpfs makes that free, and the data is thrown away anyway.
        shm = Path("/dev/shm")
        base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        self.workdir = Path(tempfile.mkdtemp(prefix="draguard-kube-", dir=base))
        try:
            self._make_pki()
            self._start_etcd()
            self.port = free_port()
            self.url = f"https://127.0.0.1:{self.port}"
            self._start_apiserver()
            self.admin_kubeconfig = self.kubeconfig()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process this control plane started (newest first) and remove its files.

        Each gets 3 s before it is killed: its data is thrown away, and kube-apiserver would wait
        out its whole grace for watch connections that never end (see :meth:`restart_apiserver`)."""
        for component in reversed(list(self._components.values())):
            component.stop(grace=3.0)
        self._components.clear()
        if getattr(self, "workdir", None) is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port (its clients see it go away).

        Call it on the test's own thread: the new process gets the parent-death signal, which the
        kernel ties to the thread that spawned it, so one started from a thread that then ends dies
        with that thread.

        It is given 2 s to stop: with clients watching (a draguard under test) kube-apiserver waits
        for their watch connections to end, which they never do, and a restart cost 15 s of that.
        Killing it then is a crash to its clients, which is what a restart test wants them to see."""
        self.stop_apiserver()
        self._start_apiserver()

    def stop_apiserver(self) -> None:
        """Kill kube-apiserver after 2 s (see :meth:`restart_apiserver`); :meth:`start_apiserver`
        brings it back on the same port. Between the two, clients see connections refused."""
        self._components.pop("kube-apiserver").stop(grace=2.0)

    def apiserver_running(self) -> bool:
        """Whether the kube-apiserver process is there: it exits by itself when a post-start hook
        times out (``rbac/bootstrap-roles`` on a starved machine), as its kubelet then restarts it."""
        component = self._components.get("kube-apiserver")
        return component is not None and component.process.poll() is None

    def start_apiserver(self) -> None:
        """Start kube-apiserver again after :meth:`stop_apiserver` (on the calling thread: see
        :meth:`restart_apiserver`) and wait until it is ready."""
        self._start_apiserver()

    def restart_etcd(self) -> None:
        """Stop etcd and start it again on the same ports and data (on this thread, as
        :meth:`restart_apiserver`). kube-apiserver stays up and sees its storage go away: requests
        fail or wait, watches from its cache end and are served again once etcd is back."""
        self._components.pop("etcd").stop(grace=2.0)
        self._start_etcd(self.etcd_url, self._etcd_peer)

    def start_scheduler(self) -> None:
        """kube-scheduler with the default profile, running until the control plane stops. It logs
        each plugin's score of each node (``schedule_one.go`` at -v=10 only: a line per plugin and
        node, nothing else), each Node and Pod event its informers handled (``eventhandlers.go``
        at -v=4), each DeviceClass its informer handed to the DRA plugin's extended-resource cache
        (``extendedresourcecache.go`` at -v=5) and each victim of a preemption (``executor.go`` at
        -v=2), flushed at once, so tests can compare scores and victims and know what the scheduler
        has seen (:meth:`scheduler_log`; ResourceSlices and ResourceClaims are logged by no one at
        any level: :meth:`scheduler_events` counts them)."""
        if "kube-scheduler" not in self._components:
            logged = "schedule_one=10,eventhandlers=4,executor=2,extendedresourcecache=5"
            flags = [f"--vmodule={logged}", "--log-flush-frequency=100ms"]
            # /readyz, not /healthz: healthy comes before its event handlers have synced (0.2 s here),
            # and a node written meanwhile reaches them whole in the first list, as an Add without the
            # Update the scenes wait for (a scene timed out so in CI).
            self._start_controller("kube-scheduler", "system:kube-scheduler", flags, ready="/readyz")

    def scheduler_log(self) -> str:
        """What kube-scheduler logged so far ("" when it is not running)."""
        component = self._components.get("kube-scheduler")
        return component.log.read_text(errors="replace") if component is not None else ""

    def scheduler_events(self) -> dict[str, int]:
        """How many events of each kind kube-scheduler's informers have handled so far (event ->
        count, e.g. ``resource.k8s.io/ResourceSliceAdd``): the ``scheduler_event_handling_duration_
        seconds`` histogram's counts from its /metrics (``eventhandlers.go`` observes one per event of
        the kinds its plugins register for, the DRA kinds among them, once the informer's store holds
        the object), read as the cluster admin, whom its delegated authorization lets in."""
        component = self._components["kube-scheduler"]
        status, text = https_get(
            component.port, "/metrics", _ssl_context(None, self._client_cert("admin", ("system:masters",)))
        )
        assert status == 200, text[:500]
        return {found.group(1): int(float(found.group(2))) for found in SCHEDULER_EVENT_COUNT.finditer(text)}

    def start_controller_manager(self) -> None:
        """kube-controller-manager: claims from templates, garbage collection, namespace lifecycle,
        service-account tokens. Node lifecycle is off (no kubelet sends heartbeats)."""
        if "kube-controller-manager" in self._components:
            return
        self._start_controller(
            "kube-controller-manager",
            "system:kube-controller-manager",
            [
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--controllers=*,-node-lifecycle-controller,-service-ca-certificate-publisher-controller",
            ],
        )

    # -- processes -------------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str]) -> Component:
        log = self.workdir / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(self.assets / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        component = Component(name, process, log)
        self._components[name] = component
        return component

    def _wait(self, component: Component, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited ({component.process.returncode}):\n{component.tail()}"
                )
            with contextlib.suppress(OSError, http.client.HTTPException):
                if ready():
                    return
            time.sleep(0.25)
        raise ControlPlaneError(
            f"{component.name} not ready after {START_TIMEOUT:.0f} s:\n{component.tail()}"
        )

    def _gates(self) -> list[str]:
        if not self.feature_gates:
            return []
        pairs = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
        return [f"--feature-gates={pairs}"]

    def _start_etcd(self, url: str = "", peer: str = "") -> None:
        self.etcd_url = url or f"http://127.0.0.1:{free_port()}"
        peer = self._etcd_peer = peer or f"http://127.0.0.1:{free_port()}"
        etcd = self._spawn(
            "etcd",
            [
                "--name=etcd0",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=etcd0={peer}",
                "--log-level=warn",
            ],
        )
        self._wait(etcd, lambda: '"health":"true"' in self._etcd_get("/health"))

    def _etcd_get(self, path: str) -> str:
        connection = http.client.HTTPConnection("127.0.0.1", int(self.etcd_url.rsplit(":", 1)[1]), timeout=5)
        try:
            connection.request("GET", path)
            return connection.getresponse().read().decode()
        finally:
            connection.close()

    def _etcd_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", int(self.etcd_url.rsplit(":", 1)[1]), timeout=10)
        try:
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            answer: dict[str, Any] = json.loads(connection.getresponse().read())
            return answer
        finally:
            connection.close()

    def write_stored(self, resource: str, obj: Mapping[str, Any]) -> None:
        """``obj`` written straight into etcd, as the API server holds an object it admitted under
        another version or other feature gates: it reads it back as stored (JSON, which its storage
        decodes as well as its own protobuf) and validates only what is written afterwards. ``resource``
        is its plural (``deviceclasses``), the key ``/registry/<resource>/[<namespace>/]<name>``."""
        meta = obj["metadata"]
        parts = ["/registry", resource, *([meta["namespace"]] if meta.get("namespace") else []), meta["name"]]
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {**obj, "metadata": {"uid": str(uuid.uuid4()), "creationTimestamp": stamp, **meta}}
        key = base64.b64encode("/".join(parts).encode()).decode()
        # Compact, as the API server encodes: raw JSON (a claim's opaque parameters) compares equal
        # byte for byte with what an update sends back.
        value = base64.b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()
        self._etcd_post("/v3/kv/put", {"key": key, "value": value})

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so watches from any older resourceVersion get 410 Gone.

        The API server compacts every five minutes by itself; a test cannot wait that long.
        Returns the revision compacted to.
        """
        key = base64.b64encode(b"/").decode()
        revision = int(self._etcd_post("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
        self._etcd_post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def _start_apiserver(self) -> None:
        w = self.workdir
        args = [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={w / 'apiserver'}",
            f"--tls-cert-file={w / 'apiserver.crt'}",
            f"--tls-private-key-file={w / 'apiserver.key'}",
            f"--client-ca-file={self.ca_file}",
            "--authorization-mode=Node,RBAC",
            # As kubeadm enables it: nodes may only write their own Node and their own ResourceSlices.
            "--enable-admission-plugins=NodeRestriction",
            # No kubelet here lifts the not-ready taint this plugin puts on every new Node: add_node
            # creates Nodes whole instead (see there).
            "--disable-admission-plugins=TaintNodesByCondition",
            "--service-cluster-ip-range=10.96.0.0/24",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
            # A 127.0.0.1 endpoint for the kubernetes Service is refused as loopback.
            "--endpoint-reconciler-type=none",
            *self._gates(),
        ]
        if self.runtime_config:
            args.append(f"--runtime-config={','.join(self.runtime_config)}")
        if self.allow_privileged:
            args.append("--allow-privileged=true")
        apiserver = self._spawn("kube-apiserver", args)
        context = self.ssl_context()
        try:
            self._wait(apiserver, lambda: https_get(self.port, "/readyz", context) == (200, "ok"))
        except ControlPlaneError as err:
            with contextlib.suppress(OSError, http.client.HTTPException):
                checks = https_get(self.port, "/readyz?verbose", context)[1].splitlines()
                failing = [c for c in checks if "[-]" in c]
                raise ControlPlaneError(f"{err}\nfailing readiness checks: {failing}") from None
            raise

    def _start_controller(self, name: str, user: str, extra: Sequence[str], ready: str = "/healthz") -> None:
        missing = missing_binaries([name])
        if missing:
            cannot_run(missing)
        cert = self._client_cert(user, ())
        kubeconfig = self.kubeconfig(cert=cert, name=name)
        port = free_port()
        component = self._spawn(
            name,
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                *self._gates(),
                *extra,
            ],
        )
        component.port = port
        context = _ssl_context(None, None)
        self._wait(component, lambda: https_get(port, ready, context)[0] == 200)

    # -- credentials -----------------------------------------------------------------------------

    def _make_pki(self) -> None:
        now = dt.datetime.now(dt.UTC)
        year = dt.timedelta(days=365)
        w = self.workdir
        self._ca = generate_ca(now, year)
        self.ca_file = _write(w / "ca.crt", self._ca.cert_pem)
        serving = issue_serving(self._ca, ["127.0.0.1", "localhost"], now, year)
        _write(w / "apiserver.crt", serving.cert_pem)
        _write(w / "apiserver.key", serving.key_pem)
        # The service-account token signer; RSA is what every client of the tokens expects.
        sa = generate_ca(now, year, KeyAlgorithm.RSA_2048)
        _write(w / "sa.key", sa.key_pem)
        public = sa.certificate.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        _write(w / "sa.pub", public)

    def _client_cert(self, user: str, groups: Sequence[str]) -> tuple[Path, Path]:
        """A client certificate for ``user`` in ``groups`` (CN and O), made once per identity. Test
        threads ask at once: unlocked, two wrote the same files, one's certificate beside the
        other's key (the client's TLS then failed with KEY_VALUES_MISMATCH)."""
        key = (user, tuple(groups))
        with self._users_lock:
            if key not in self._users:
                pair = issue_client(self._ca, user, groups, dt.datetime.now(dt.UTC), dt.timedelta(days=2))
                stem = f"user-{len(self._users)}"
                self._users[key] = (
                    _write(self.workdir / f"{stem}.crt", pair.cert_pem),
                    _write(self.workdir / f"{stem}.key", pair.key_pem),
                )
            return self._users[key]

    def client_certificate(self, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
        """The certificate and key files of ``user`` in ``groups``, issued by the cluster's CA."""
        return self._client_cert(user, groups)

    def ssl_context(self, user: str = "admin", groups: Sequence[str] = ("system:masters",)) -> ssl.SSLContext:
        """A TLS context that trusts the API server and authenticates as ``user``."""
        return _ssl_context(self.ca_file, self._client_cert(user, groups))

    def kubeconfig(
        self,
        token: str | None = None,
        cert: tuple[Path, Path] | None = None,
        name: str = "admin",
        server: str = "",
    ) -> Path:
        """A kubeconfig file for this server: a bearer ``token``, a client ``cert``, or the admin;
        ``server`` another address that reaches it (a relay whose connections a test can cut)."""
        if token is not None:
            credentials: dict[str, str] = {"token": token}
        else:
            crt, key = cert or self._client_cert("admin", ("system:masters",))
            credentials = {"client-certificate": str(crt), "client-key": str(key)}
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": server or self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": name, "user": credentials}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": name}}],
            "current-context": "test",
        }
        path = self.workdir / f"kubeconfig-{name}-{len(list(self.workdir.glob('kubeconfig-*')))}.yaml"
        return _write(path, json.dumps(document))

    def client(self, user: str | None = None, groups: Sequence[str] = ()) -> client.ApiClient:
        """An API client: the cluster admin, or ``user`` in ``groups`` authenticated by a client
        certificate (the API server adds ``system:authenticated``)."""
        crt, key = (
            self._client_cert(user, groups) if user else self._client_cert("admin", ("system:masters",))
        )
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.cert_file = str(crt)
        configuration.key_file = str(key)
        return client.ApiClient(configuration)

    # -- objects ---------------------------------------------------------------------------------

    def grant(self, namespace: str | None, user: str, rules: Sequence[Mapping[str, Any]]) -> None:
        """A Role with ``rules`` bound to ``user`` in ``namespace``, or with ``namespace`` None a
        ClusterRole bound cluster-wide (the built-in ``edit`` and ``admin`` roles are empty until
        the controller-manager aggregates them)."""
        rbac = client.RbacAuthorizationV1Api(self.client())
        name = f"grant-{user.replace(':', '-')}"
        role = {"metadata": {"name": name}, "rules": list(rules)}
        binding = {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role" if namespace else "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
        if namespace:
            rbac.create_namespaced_role(namespace, role)
            rbac.create_namespaced_role_binding(namespace, binding)
        else:
            rbac.create_cluster_role(role)
            rbac.create_cluster_role_binding(binding)

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token of the ServiceAccount (TokenRequest), as a pod of it would be given."""
        core = client.CoreV1Api(self.client())
        answer = core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": seconds}}
        )
        token: str = answer.status.token
        return token

    def token_client(self, token: str) -> client.ApiClient:
        """An API client authenticated by a bearer ``token`` (a ServiceAccount's)."""
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
        return client.ApiClient(configuration)

    @contextlib.contextmanager
    def namespace(self, name: str = "") -> Iterator[str]:
        """A fresh namespace (``name``, or a random one) for the ``with`` block, with its ``default``
        ServiceAccount (which pods need, and which only the controller-manager would otherwise
        create); deleted afterwards."""
        name = name or f"t-{secrets.token_hex(4)}"
        core = client.CoreV1Api(self.client())
        core.create_namespace({"metadata": {"name": name}})
        try:
            core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
        except client.ApiException as err:
            if err.status != 409:  # the controller-manager made it first
                raise
        try:
            yield name
        finally:
            core.delete_namespace(name)

    def add_node(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] | None = None,
        unschedulable: bool = False,
    ) -> dict[str, Any]:
        """A Node the scheduler binds pods to: Ready, with ``allocatable``, only the given taints.

        Created whole in one write, status included, as a kubelet registers its Node: the
        scheduler's informer then gets it complete in its Add event, and nothing about the node is
        still on its way when a test asks the scheduler (a status written afterwards came as an
        Update the scheduler sometimes had not handled yet on a busy machine).
        """
        core = client.CoreV1Api(self.client())
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        resources.update(allocatable or {})
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"unschedulable": unschedulable, "taints": list(taints or [])},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    },
                ],
            },
        }
        node: dict[str, Any] = core.api_client.sanitize_for_serialization(core.create_node(body))
        return node


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@dataclass(frozen=True)
class Answer:
    """An API server answer as a client sees it: status, JSON body and the ``Warning`` headers."""

    status: int
    body: dict[str, Any]
    warnings: tuple[str, ...]

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


def call(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Mapping[str, Any] | None = None,
    query: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Answer:
    """One request through the ``kubernetes`` client, answered whatever the status (no exception):
    the e2e tests look at refusals and warnings as closely as at successes. PATCH is a JSON merge
    patch (``kubectl patch --type=merge``). ``timeout``: seconds to wait for the answer (the
    client's urllib3 raises past it), none by default."""
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    params = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list((query or {}).items()),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=dict(body) if body is not None else None,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*params, _request_timeout=timeout).response
    raw = response.read()
    warnings = tuple(_warning_text(w) for w in response.headers.get_all("Warning") or ())
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:  # not from the API server's handlers: an overloaded server's plain text
        body = {"message": raw.decode(errors="replace")}
    return Answer(response.status, body, warnings)


def _warning_text(header: str) -> str:
    """The text of an RFC 7234 ``Warning: 299 - "text"`` header, as kubectl prints it."""
    _code, _, rest = header.partition(" ")
    _, _, quoted = rest.partition(" ")
    return json.loads(quoted) if quoted.startswith('"') else header
