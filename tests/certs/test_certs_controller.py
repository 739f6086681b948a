"""Self-managed certificates end to end: Secrets, caBundle injection, CA roll, leadership.

The API server here is the stand-in from ``apiserver_standin.py``: kube-apiserver cannot be
installed in this environment, so a small in-memory server on 127.0.0.1 speaks the parts of the
Kubernetes API the controller uses (Secrets, Leases, webhook configurations) with the same
resourceVersion preconditions (409 Conflict), and the controller drives it through the real
``kubernetes`` client.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from apiserver_standin import Apiserver
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client

from certs.controller import (
    ANNOTATION_NEXT_SINCE,
    ANNOTATION_RETIRING_SINCE,
    CertController,
    Conflict,
    Targets,
    run,
)
from certs.kube import Kube
from certs.leader import LeaseConfig, LeaseElector
from certs.material import generate_ca, issue_serving, parse_bundle, service_hosts
from certs.reloader import CertReloader
from certs.rotation import RotationPolicy

NS = "draguard"
TARGETS = Targets(namespace=NS, validating=("draguard-validating",), mutating=("draguard-mutating",))
POLICY = RotationPolicy(hosts=tuple(service_hosts("draguard", NS, ["localhost"])))


def webhook(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": "draguard", "namespace": NS, "path": "/validate"}},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        **extra,
    }


@pytest.fixture
def configs(apiserver: Apiserver) -> Apiserver:
    """The chart's two webhook configurations, installed with an empty caBundle."""
    apiserver.store.put(
        apiserver.resource("ValidatingWebhookConfiguration"),
        "",
        {
            "metadata": {"name": "draguard-validating"},
            # A field this client version does not know must survive our read-modify-write.
            "webhooks": [
                webhook("selectors.draguard.io", futureField={"x": 1}),
                webhook("quota.draguard.io"),
            ],
        },
    )
    apiserver.store.put(
        apiserver.resource("MutatingWebhookConfiguration"),
        "",
        {"metadata": {"name": "draguard-mutating"}, "webhooks": [webhook("prescheduled.draguard.io")]},
    )
    return apiserver


def controller(api_client: client.ApiClient, policy: RotationPolicy = POLICY) -> CertController:
    return CertController(Kube(api_client), TARGETS, policy)


def secret(apiserver: Apiserver, name: str) -> dict[str, Any]:
    found = apiserver.store.get(apiserver.resource("Secret"), NS, name)
    assert found is not None, f"Secret {name} was not written"
    return found


def data(apiserver: Apiserver, name: str, key: str) -> bytes:
    return base64.b64decode(secret(apiserver, name)["data"][key])


def bundles(apiserver: Apiserver) -> list[bytes]:
    """The caBundle of every webhook of our configurations."""
    found = []
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in apiserver.store.of(apiserver.resource(kind)):
            found += [base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in config["webhooks"]]
    return found


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
    configs: Apiserver, api_client: client.ApiClient
) -> None:
    now = dt.datetime.now(dt.UTC)
    controller(api_client).reconcile(now)
    ca_pem = data(configs, "draguard-ca", "ca.crt")
    tls_pem = data(configs, "draguard-tls", "tls.crt")
    assert trusted_by(tls_pem, ca_pem)
    assert secret(configs, "draguard-tls")["type"] == "kubernetes.io/tls"
    assert data(configs, "draguard-tls", "ca.crt") == ca_pem
    assert bundles(configs) == [ca_pem, ca_pem, ca_pem]
    san = x509.load_pem_x509_certificate(tls_pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert san.value.get_values_for_type(x509.DNSName) == [
        "draguard.draguard.svc",
        "draguard.draguard.svc.cluster.local",
        "localhost",
    ]
    # The private key of the CA is only in the CA Secret, which no pod mounts.
    assert "ca.key" in secret(configs, "draguard-ca")["data"]
    assert set(secret(configs, "draguard-tls")["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    validating = configs.store.get(
        configs.resource("ValidatingWebhookConfiguration"), "", "draguard-validating"
    )
    assert validating is not None and validating["webhooks"][0]["futureField"] == {"x": 1}


def test_a_second_reconcile_with_nothing_due_writes_nothing(
    configs: Apiserver, api_client: client.ApiClient
) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(api_client)
    due = ctl.reconcile(now)
    configs.requests.clear()
    assert ctl.reconcile(now + dt.timedelta(minutes=1)) == due
    assert [m for m, _ in configs.requests] == ["GET"] * len(configs.requests)


def test_serving_renewal_at_two_thirds_keeps_the_ca(configs: Apiserver, api_client: client.ApiClient) -> None:
    t0 = dt.datetime.now(dt.UTC) - dt.timedelta(days=61)
    ctl = controller(api_client)
    due = ctl.reconcile(t0)
    first = data(configs, "draguard-tls", "tls.crt")
    ca_before = data(configs, "draguard-ca", "ca.crt")
    ctl.reconcile(due - dt.timedelta(seconds=1))
    assert data(configs, "draguard-tls", "tls.crt") == first
    ctl.reconcile(due)
    renewed = data(configs, "draguard-tls", "tls.crt")
    assert renewed != first
    assert data(configs, "draguard-ca", "ca.crt") == ca_before
    assert trusted_by(renewed, bundles(configs)[0])


def test_a_concurrent_write_is_a_conflict_and_nothing_further_is_written(
    configs: Apiserver, api_client: client.ApiClient
) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(api_client)
    ctl.reconcile(now)
    ca_resource = configs.resource("Secret")

    def sneak_in(method: str, path: str, body: bytes) -> None:
        if method == "PUT" and path.endswith("/secrets/draguard-ca"):
            configs.before = None
            current = configs.store.get(ca_resource, NS, "draguard-ca")
            assert current is not None
            configs.store.put(ca_resource, NS, current)  # another writer bumps the resourceVersion

    configs.before = sneak_in
    configs.requests.clear()
    with pytest.raises(Conflict, match="draguard-ca"):
        ctl.reconcile(now + dt.timedelta(days=300))  # the CA is due: the controller writes it
    assert [r for r in configs.requests if r[0] != "GET"] == [
        ("PUT", f"/api/v1/namespaces/{NS}/secrets/draguard-ca")
    ]


def test_stale_cabundle_edited_by_hand_is_put_back(configs: Apiserver, api_client: client.ApiClient) -> None:
    now = dt.datetime.now(dt.UTC)
    ctl = controller(api_client)
    ctl.reconcile(now)
    resource = configs.resource("MutatingWebhookConfiguration")
    edited = configs.store.get(resource, "", "draguard-mutating")
    assert edited is not None
    edited["webhooks"][0]["clientConfig"]["caBundle"] = ""
    configs.store.put(resource, "", edited)
    ctl.reconcile(now + dt.timedelta(minutes=1))
    assert len(set(bundles(configs))) == 1 and bundles(configs)[0] == data(configs, "draguard-ca", "ca.crt")


def annotate(apiserver: Apiserver, name: str, **annotations: str) -> None:
    """Another client (a backup tool, a secret reflector, an admin) annotates one of our Secrets."""
    resource = apiserver.resource("Secret")
    current = secret(apiserver, name)
    current["metadata"].setdefault("annotations", {}).update(annotations)
    current["metadata"].setdefault("labels", {})["example.com/team"] = "platform"
    apiserver.store.put(resource, NS, current)


def test_annotations_others_put_on_our_secrets_survive_our_writes(
    configs: Apiserver, api_client: client.ApiClient
) -> None:
    """Our writes merge metadata: other clients' annotations and labels stay, and on our own keys
    ours win, which includes removing the roll's annotations once their step is over."""
    policy = RotationPolicy(hosts=POLICY.hosts, overlap=dt.timedelta(hours=1))
    ctl = controller(api_client, policy)
    ctl.reconcile(dt.datetime.now(dt.UTC))
    for name in ("draguard-ca", "draguard-tls"):
        annotate(configs, name, **{"example.com/backup": "daily"})
    ca = x509.load_pem_x509_certificate(data(configs, "draguard-ca", "ca.crt"))
    renew_at = policy.renewal_time(ca)
    ours = []
    for step in range(3):  # announce, promote, retire: each rewrites the CA Secret
        ctl.reconcile(renew_at + step * policy.overlap)
        for name in ("draguard-ca", "draguard-tls"):
            metadata = secret(configs, name)["metadata"]
            assert metadata["annotations"]["example.com/backup"] == "daily", (step, name)
            assert metadata["labels"]["example.com/team"] == "platform", (step, name)
        annotations = secret(configs, "draguard-ca")["metadata"]["annotations"]
        ours.append(sorted(k for k in annotations if k.startswith("draguard.io/")))
    assert ours == [[ANNOTATION_NEXT_SINCE], [ANNOTATION_RETIRING_SINCE], []]
    assert len(parse_bundle(bundles(configs)[0])) == 1  # the roll did finish


def check_order(apiserver: Apiserver, violations: list[str]) -> None:
    """On every write of the serving Secret, check the caBundles already published trust it.

    This is the invariant of the whole design: the API server must never be shown a certificate
    its caBundle does not trust, so the bundle has to be in place *before* the Secret changes.
    """

    def check(method: str, path: str, body: bytes) -> None:
        if method in ("POST", "PUT") and path.split("?")[0].endswith(("/secrets", "/secrets/draguard-tls")):
            written = json.loads(body)
            if written["metadata"]["name"] != "draguard-tls":
                return
            cert = base64.b64decode(written["data"]["tls.crt"])
            if not all(trusted_by(cert, bundle) for bundle in bundles(apiserver)):
                violations.append(
                    f"serving certificate written before its CA was published ({method} {path})"
                )

    apiserver.before = check


async def handshake(port: int, bundle: bytes) -> None:
    context = ssl.create_default_context(cadata=bundle.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    writer.close()


async def test_ca_roll_keeps_old_and_new_clients_working_during_overlap(
    configs: Apiserver, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """Walk a full CA roll. At every step, real TLS clients holding the caBundle published before
    the step (an API server that has not caught up) and the one published after it both accept
    what each replica serves: one replica reloads at once, the other still has the previous pair.

    The simulated clock runs in the past so that every certificate it produces is valid at the
    real time OpenSSL checks against.
    """
    policy = RotationPolicy(hosts=POLICY.hosts, overlap=dt.timedelta(hours=1))
    real_now = dt.datetime.now(dt.UTC)
    ctl = controller(api_client, policy)
    violations: list[str] = []
    check_order(configs, violations)
    ctl.reconcile(real_now - dt.timedelta(days=300))
    ca = x509.load_pem_x509_certificate(data(configs, "draguard-ca", "ca.crt"))
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
        return data(configs, "draguard-tls", "tls.crt"), data(configs, "draguard-tls", "tls.key")

    sizes = []
    try:
        mount(fresh, serving())
        for step in range(4):  # announce, promote, retire, then nothing left to do
            before_bundle, before_pair = bundles(configs)[0], serving()
            ctl.reconcile(renew_at + step * policy.overlap)
            assert renew_at + step * policy.overlap < real_now
            mount(lagging, before_pair)
            mount(fresh, serving())
            for bundle in (before_bundle, bundles(configs)[0]):
                for port in ports:
                    await handshake(port, bundle)
            sizes.append(len(parse_bundle(bundles(configs)[0])))
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()

    assert violations == []
    assert sizes == [2, 2, 1, 1]
    final = parse_bundle(bundles(configs)[0])
    assert final != [ca] and len(final) == 1
    # The old CA does not trust what is served now: the roll really happened.
    assert not trusted_by(
        data(configs, "draguard-tls", "tls.crt"), ca.public_bytes(serialization.Encoding.PEM)
    )


def test_the_order_check_catches_a_serving_certificate_from_an_unpublished_ca(
    configs: Apiserver, api_client: client.ApiClient
) -> None:
    """The invariant check above must be able to fail: a Secret written by hand with a
    certificate from a foreign CA is flagged."""
    violations: list[str] = []
    check_order(configs, violations)
    controller(api_client).reconcile(dt.datetime.now(dt.UTC))
    assert violations == []
    foreign = generate_ca(dt.datetime.now(dt.UTC), dt.timedelta(days=1))
    pair = issue_serving(foreign, ["localhost"], dt.datetime.now(dt.UTC), dt.timedelta(hours=1))
    body = secret(configs, "draguard-tls")
    body["data"]["tls.crt"] = base64.b64encode(pair.cert_pem).decode()
    Kube(api_client).replace(f"/api/v1/namespaces/{NS}/secrets/draguard-tls", body)
    assert len(violations) == 1


def test_only_the_leader_writes(configs: Apiserver, api_client: client.ApiClient) -> None:
    """Three replicas run the loop at once; exactly one writes Secrets and webhook configurations."""

    class CountingKube(Kube):
        def __init__(self, api: client.ApiClient) -> None:
            super().__init__(api)
            self.writes: list[str] = []

        def create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
            self.writes.append(collection)
            return super().create(collection, body)

        def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
            self.writes.append(path)
            return super().replace(path, body)

    stop = threading.Event()
    replicas = []
    for identity in ("pod-a", "pod-b", "pod-c"):
        kube = CountingKube(api_client)
        elector = LeaseElector(kube, LeaseConfig(NS, "draguard-certs", identity))
        ctl = CertController(kube, TARGETS, POLICY)
        thread = threading.Thread(target=run, args=(elector, ctl, stop, dt.timedelta(milliseconds=10)))
        replicas.append((kube, thread))
        thread.start()
    try:
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
        while configs.store.get(configs.resource("Secret"), NS, "draguard-tls") is None:
            assert dt.datetime.now(dt.UTC) < deadline, "no replica wrote the serving Secret"
            threading.Event().wait(0.01)
    finally:
        stop.set()
        for _, thread in replicas:
            thread.join(5)
    writers = [k for k, _ in replicas if any("/leases" not in w for w in k.writes)]
    assert len(writers) == 1
    assert len(configs.store.of(configs.resource("Secret"))) == 2
    # Stopping released the lease for a quick hand-over.
    lease = configs.store.get(configs.resource("Lease"), NS, "draguard-certs")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
