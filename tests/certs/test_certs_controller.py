"""Self-managed certificates end to end: Secrets, caBundle injection, CA roll, leadership.

The controller drives the real API server of the session through the real ``kubernetes`` client:
Secrets in a fresh namespace, two webhook configurations of its own (with no rules, so they
intercept nothing), Leases. Another client writing at a chosen moment (``RecordingKube.before``)
makes the races real ones, answered with the API server's own 409.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kube_recording import RecordingKube
from kubernetes import client

from certs.controller import (
    ANNOTATION_NEXT_SINCE,
    ANNOTATION_RETIRING_SINCE,
    CertController,
    Conflict,
    Targets,
    run,
)
from certs.kube import Kube, cluster, namespaced
from certs.leader import LeaseConfig, LeaseElector
from certs.material import generate_ca, issue_serving, parse_bundle, service_hosts
from certs.reloader import CertReloader
from certs.rotation import RotationPolicy

POLICY = RotationPolicy(hosts=tuple(service_hosts("draguard", "draguard", ["localhost"])))
ADMISSION = "admissionregistration.k8s.io/v1"


def webhook(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    """A webhook with no rules: it intercepts nothing, in a cluster other tests share."""
    return {
        "name": name,
        "clientConfig": {"service": {"name": "draguard", "namespace": namespace, "path": "/validate"}},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        **extra,
    }


@dataclass
class Configs:
    """Our namespace and our two webhook configurations, read back through another client."""

    namespace: str
    targets: Targets
    reader: Kube

    @property
    def paths(self) -> list[str]:
        return [
            cluster(ADMISSION, "validatingwebhookconfigurations", self.targets.validating[0]),
            cluster(ADMISSION, "mutatingwebhookconfigurations", self.targets.mutating[0]),
        ]

    def get(self, path: str) -> dict[str, Any]:
        found = self.reader.get(path)
        assert found is not None, f"{path} does not exist"
        return found

    def secret(self, name: str) -> dict[str, Any]:
        return self.get(namespaced("v1", self.namespace, "secrets", name))

    def data(self, name: str, key: str) -> bytes:
        return base64.b64decode(self.secret(name)["data"][key])

    def bundles(self) -> list[bytes]:
        """The caBundle of every webhook of our configurations."""
        return [
            base64.b64decode(w["clientConfig"].get("caBundle", ""))
            for path in self.paths
            for w in self.get(path)["webhooks"]
        ]

    def rewrite(self, path: str, change: Any) -> None:
        """Another client (an admin, a backup tool) changes an object of ours."""
        current = self.get(path)
        change(current)
        self.reader.replace(path, current)


@pytest.fixture
def configs(kube_namespace: str, api_client: client.ApiClient) -> Iterator[Configs]:
    """The chart's two webhook configurations, installed with an empty caBundle; a field the
    controller does not know of (a matchCondition, a timeout someone set) must survive its writes."""
    ns = kube_namespace
    targets = Targets(namespace=ns, validating=(f"{ns}-validating",), mutating=(f"{ns}-mutating",))
    reader = Kube(api_client)
    condition = {"name": "never", "expression": "false"}
    validating = [
        webhook("selectors.draguard.io", ns, matchConditions=[condition], timeoutSeconds=7),
        webhook("quota.draguard.io", ns),
    ]
    configs = Configs(ns, targets, reader)
    bodies = [
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": targets.validating[0]},
            "webhooks": validating,
        },
        {
            "apiVersion": ADMISSION,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": targets.mutating[0]},
            "webhooks": [webhook("prescheduled.draguard.io", ns)],
        },
    ]
    for path, body in zip(configs.paths, bodies, strict=True):
        reader.create(path.rsplit("/", 1)[0], body)
    try:
        yield configs
    finally:
        for path in configs.paths:
            reader._request("DELETE", path)


def controller(kube: Kube, configs: Configs, policy: RotationPolicy = POLICY) -> CertController:
    return CertController(kube, configs.targets, policy)


def trusted_by(cert_pem: bytes, bundle: bytes) -> bool:
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    for ca in parse_bundle(bundle):
        try:
            cert.verify_directly_issued_by(ca)
        except Exception:
            continue
        return True
    return False


def test_first_reconcile_creates_ca_and_serving_secrets_and_injects_the_bundle(
    configs: Configs, kube: RecordingKube
) -> None:
    now = dt.datetime.now(dt.UTC)
    controller(kube, configs).reconcile(now)
    ca_pem = configs.data("draguard-ca", "ca.crt")
    tls_pem = configs.data("draguard-tls", "tls.crt")
    assert trusted_by(tls_pem, ca_pem)
    assert configs.secret("draguard-tls")["type"] == "kubernetes.io/tls"
    assert configs.data("draguard-tls", "ca.crt") == ca_pem
    assert configs.bundles() == [ca_pem, ca_pem, ca_pem]
    san = x509.load_pem_x509_certificate(tls_pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert san.value.get_values_for_type(x509.DNSName) == [
        "draguard.draguard.svc",
        "draguard.draguard.svc.cluster.local",
        "localhost",
    ]
    # The private key of the CA is only in the CA Secret, which no pod mounts.
    assert "ca.key" in configs.secret("draguard-ca")["data"]
    assert set(configs.secret("draguard-tls")["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    # our read-modify-write kept what others set, and what the API server defaulted
    selectors = configs.get(configs.paths[0])["webhooks"][0]
    assert selectors["matchConditions"] == [{"name": "never", "expression": "false"}]
    assert selectors["timeoutSeconds"] == 7 and selectors["matchPolicy"] == "Equivalent"


def test_a_second_reconcile_with_nothing_due_writes_nothing(configs: Configs, kube: RecordingKube) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(kube, configs)
    due = ctl.reconcile(now)
    kube.requests.clear()
    assert ctl.reconcile(now + dt.timedelta(minutes=1)) == due
    assert [m for m, _ in kube.requests] == ["GET"] * len(kube.requests)


def test_serving_renewal_at_two_thirds_keeps_the_ca(configs: Configs, kube: RecordingKube) -> None:
    t0 = dt.datetime.now(dt.UTC) - dt.timedelta(days=61)
    ctl = controller(kube, configs)
    due = ctl.reconcile(t0)
    first = configs.data("draguard-tls", "tls.crt")
    ca_before = configs.data("draguard-ca", "ca.crt")
    ctl.reconcile(due - dt.timedelta(seconds=1))
    assert configs.data("draguard-tls", "tls.crt") == first
    ctl.reconcile(due)
    renewed = configs.data("draguard-tls", "tls.crt")
    assert renewed != first
    assert configs.data("draguard-ca", "ca.crt") == ca_before
    assert trusted_by(renewed, configs.bundles()[0])


def test_a_concurrent_write_is_a_conflict_and_nothing_further_is_written(
    configs: Configs, kube: RecordingKube
) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(kube, configs)
    ctl.reconcile(now)
    ca_path = namespaced("v1", configs.namespace, "secrets", "draguard-ca")

    def sneak_in(method: str, path: str, body: dict[str, Any] | None) -> None:
        if method == "PUT" and path == ca_path:
            kube.before = None
            # another writer changes the Secret: its resourceVersion moves on
            configs.rewrite(ca_path, lambda s: s["metadata"].setdefault("labels", {}).update(touched="yes"))

    kube.before = sneak_in
    kube.requests.clear()
    with pytest.raises(Conflict, match="draguard-ca"):
        ctl.reconcile(now + dt.timedelta(days=300))  # the CA is due: the controller writes it
    assert [r for r in kube.requests if r[0] != "GET"] == [("PUT", ca_path)]


def test_stale_cabundle_edited_by_hand_is_put_back(configs: Configs, kube: RecordingKube) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(kube, configs)
    ctl.reconcile(now)

    def forget(config: dict[str, Any]) -> None:
        config["webhooks"][0]["clientConfig"]["caBundle"] = ""

    configs.rewrite(configs.paths[1], forget)
    ctl.reconcile(now + dt.timedelta(minutes=1))
    assert len(set(configs.bundles())) == 1 and configs.bundles()[0] == configs.data("draguard-ca", "ca.crt")


def annotate(configs: Configs, name: str, **annotations: str) -> None:
    """Another client (a backup tool, a secret reflector, an admin) annotates one of our Secrets."""

    def change(secret: dict[str, Any]) -> None:
        secret["metadata"].setdefault("annotations", {}).update(annotations)
        secret["metadata"].setdefault("labels", {})["example.com/team"] = "platform"

    configs.rewrite(namespaced("v1", configs.namespace, "secrets", name), change)


def test_annotations_others_put_on_our_secrets_survive_our_writes(
    configs: Configs, kube: RecordingKube
) -> None:
    """Our writes merge metadata: other clients' annotations and labels stay, and on our own keys
    ours win, which includes removing the roll's annotations once their step is over."""
    policy = RotationPolicy(hosts=POLICY.hosts, overlap=dt.timedelta(hours=1))
    ctl = controller(kube, configs, policy)
    ctl.reconcile(dt.datetime.now(dt.UTC))
    for name in ("draguard-ca", "draguard-tls"):
        annotate(configs, name, **{"example.com/backup": "daily"})
    ca = x509.load_pem_x509_certificate(configs.data("draguard-ca", "ca.crt"))
    renew_at = policy.renewal_time(ca)
    ours = []
    for step in range(3):  # announce, promote, retire: each rewrites the CA Secret
        ctl.reconcile(renew_at + step * policy.overlap)
        for name in ("draguard-ca", "draguard-tls"):
            metadata = configs.secret(name)["metadata"]
            assert metadata["annotations"]["example.com/backup"] == "daily", (step, name)
            assert metadata["labels"]["example.com/team"] == "platform", (step, name)
        annotations = configs.secret("draguard-ca")["metadata"]["annotations"]
        ours.append(sorted(k for k in annotations if k.startswith("draguard.io/")))
    assert ours == [[ANNOTATION_NEXT_SINCE], [ANNOTATION_RETIRING_SINCE], []]
    assert len(parse_bundle(configs.bundles()[0])) == 1  # the roll did finish


def check_order(kube: RecordingKube, configs: Configs, violations: list[str]) -> None:
    """On every write of the serving Secret, check the caBundles already published trust it.

    This is the invariant of the whole design: the API server must never be shown a certificate
    its caBundle does not trust, so the bundle has to be in place *before* the Secret changes.
    """

    def check(method: str, path: str, body: dict[str, Any] | None) -> None:
        if method in ("POST", "PUT") and body is not None and body["metadata"]["name"] == "draguard-tls":
            cert = base64.b64decode(body["data"]["tls.crt"])
            if not all(trusted_by(cert, bundle) for bundle in configs.bundles()):
                violations.append(
                    f"serving certificate written before its CA was published ({method} {path})"
                )

    kube.before = check


async def handshake(port: int, bundle: bytes) -> None:
    context = ssl.create_default_context(cadata=bundle.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    writer.close()


async def test_ca_roll_keeps_old_and_new_clients_working_during_overlap(
    configs: Configs, kube: RecordingKube, tmp_path: Path
) -> None:
    """Walk a full CA roll. At every step, real TLS clients holding the caBundle published before
    the step (an API server that has not caught up) and the one published after it both accept
    what each replica serves: one replica reloads at once, the other still has the previous pair.

    The simulated clock runs in the past so that every certificate it produces is valid at the
    real time OpenSSL checks against.
    """
    policy = RotationPolicy(hosts=POLICY.hosts, overlap=dt.timedelta(hours=1))
    real_now = dt.datetime.now(dt.UTC)
    ctl = controller(kube, configs, policy)
    violations: list[str] = []
    check_order(kube, configs, violations)
    ctl.reconcile(real_now - dt.timedelta(days=300))
    ca = x509.load_pem_x509_certificate(configs.data("draguard-ca", "ca.crt"))
    renew_at = policy.renewal_time(ca)
    ctl.reconcile(renew_at - dt.timedelta(days=1))  # a serving certificate that is still valid today

    fresh, lagging = (
        CertReloader.from_dir(str(tmp_path / "fresh")),
        CertReloader.from_dir(str(tmp_path / "lag")),
    )
    servers = [
        await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=r.server_context)
        for r in (fresh, lagging)
    ]
    ports = [s.sockets[0].getsockname()[1] for s in servers]

    def mount(reloader: CertReloader, pair: tuple[bytes, bytes]) -> None:
        Path(reloader.cert_file).parent.mkdir(exist_ok=True)
        Path(reloader.cert_file).write_bytes(pair[0])
        Path(reloader.key_file).write_bytes(pair[1])
        reloader.reload()

    def serving() -> tuple[bytes, bytes]:
        return configs.data("draguard-tls", "tls.crt"), configs.data("draguard-tls", "tls.key")

    sizes = []
    try:
        mount(fresh, serving())
        for step in range(4):  # announce, promote, retire, then nothing left to do
            before_bundle, before_pair = configs.bundles()[0], serving()
            ctl.reconcile(renew_at + step * policy.overlap)
            assert renew_at + step * policy.overlap < real_now
            mount(lagging, before_pair)
            mount(fresh, serving())
            for bundle in (before_bundle, configs.bundles()[0]):
                for port in ports:
                    await handshake(port, bundle)
            sizes.append(len(parse_bundle(configs.bundles()[0])))
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()

    assert violations == []
    assert sizes == [2, 2, 1, 1]
    final = parse_bundle(configs.bundles()[0])
    assert final != [ca] and len(final) == 1
    # The old CA does not trust what is served now: the roll really happened.
    assert not trusted_by(
        configs.data("draguard-tls", "tls.crt"), ca.public_bytes(serialization.Encoding.PEM)
    )


def test_the_order_check_catches_a_serving_certificate_from_an_unpublished_ca(
    configs: Configs, kube: RecordingKube
) -> None:
    """The invariant check above must be able to fail: a Secret written by hand with a
    certificate from a foreign CA is flagged."""
    violations: list[str] = []
    check_order(kube, configs, violations)
    controller(kube, configs).reconcile(dt.datetime.now(dt.UTC))
    assert violations == []
    foreign = generate_ca(dt.datetime.now(dt.UTC), dt.timedelta(days=1))
    pair = issue_serving(foreign, ["localhost"], dt.datetime.now(dt.UTC), dt.timedelta(hours=1))
    body = configs.secret("draguard-tls")
    body["data"]["tls.crt"] = base64.b64encode(pair.cert_pem).decode()
    kube.replace(namespaced("v1", configs.namespace, "secrets", "draguard-tls"), body)
    assert len(violations) == 1


def test_only_the_leader_writes(configs: Configs, kube: RecordingKube) -> None:
    """Three replicas run the loop at once; exactly one writes Secrets and webhook configurations."""

    stop = threading.Event()
    replicas = []
    for identity in ("pod-a", "pod-b", "pod-c"):
        replica = RecordingKube(kube._api)
        elector = LeaseElector(replica, LeaseConfig(configs.namespace, "draguard-certs", identity))
        ctl = CertController(replica, configs.targets, POLICY)
        thread = threading.Thread(target=run, args=(elector, ctl, stop, dt.timedelta(milliseconds=10)))
        replicas.append((replica, thread))
        thread.start()
    tls = namespaced("v1", configs.namespace, "secrets", "draguard-tls")
    try:
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=10)
        while configs.reader.get(tls) is None:
            assert dt.datetime.now(dt.UTC) < deadline, "no replica wrote the serving Secret"
            threading.Event().wait(0.05)
    finally:
        stop.set()
        for _, thread in replicas:
            thread.join(5)
    writers = [r for r, _ in replicas if any(m != "GET" and "/leases" not in p for m, p in r.requests)]
    assert len(writers) == 1
    secrets = configs.get(namespaced("v1", configs.namespace, "secrets"))["items"]
    assert sorted(s["metadata"]["name"] for s in secrets) == ["draguard-ca", "draguard-tls"]
    # Stopping released the lease for a quick hand-over.
    lease = configs.get(namespaced("coordination.k8s.io/v1", configs.namespace, "leases", "draguard-certs"))
    assert lease["spec"]["holderIdentity"] == ""
