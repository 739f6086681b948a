"""selfManaged certificates through the real API server: the replica holding the Lease rotates the
serving certificate and rolls the CA, the Secret and the caBundle of the real webhook configurations
are rewritten, and the API server keeps calling draguard through every swap.

Lifetimes are cut to seconds (chart values ``tls.selfManaged.*``): the serving certificate lives
15 s, the CA 30 s, each renewed at a third of its life (the CA roll then ends by 16 s, long before
the old CA expires, instead of the 26 s at the default two thirds), and the CA rolls with a 3 s
overlap (announce: both CAs in the caBundle; promote: the new CA signs a new serving certificate;
retire: the old CA leaves the caBundle). A client creates ResourceClaims all along, each through the ``Fail``
selectors webhook, so any moment at which the API server could not reach or trust draguard is a
failed admission; they are counted, and the count must be 0. Half way, the elected replica is
stopped: the other one takes the Lease over and carries on.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import NAMESPACE, Draguard, installed

NS = "e2e-certificates"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/draguard-certs"
TLS_SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/draguard-tls"
VALUES = {
    "tls": {
        "selfManaged": {"caValidity": "30s", "servingValidity": "15s", "renewFraction": 0.34, "overlap": "3s"}
    },
    # a MutatingWebhookConfiguration too, so that both kinds get their caBundle rewritten
    "webhooks": {"prescheduled": {"mutating": {"enabled": True}}},
}
CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/draguard",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/draguard",
)


def claim(i: int) -> dict[str, Any]:
    selector = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].index >= 0'
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression": selector}}]},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"through-rotation-{i}"},
        "spec": {"devices": {"requests": [request]}},
    }


@dataclass
class Watched:
    """What was seen while certificates rotated: each distinct caBundle of each webhook configuration,
    each serving certificate in the Secret, the Lease holders, and every admission."""

    bundles: dict[str, list[str]] = field(default_factory=lambda: {path: [] for path in CONFIGURATIONS})
    serving: list[str] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)
    admitted: int = 0
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def note(self, seen: list[str], value: str) -> None:
        if value and (not seen or seen[-1] != value):
            seen.append(value)


def admissions(plane: ControlPlane, watched: Watched, worker: int) -> None:
    """Create claims through the selectors webhook (failurePolicy Fail) until told to stop.

    As dry runs: the API server runs its whole admission chain, the webhook call (and its TLS
    handshake) included, and stores nothing, so no later module meets hundreds of claims deleted
    under its own webhooks when the namespace goes."""
    api = plane.client("tenant", ["team"])
    path = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
    i = 0
    while not watched.stop.is_set():
        answer = call(api, "POST", path, claim(worker * 100_000 + i), query={"dryRun": "All"})
        if answer.status == 201:
            watched.admitted += 1
        else:
            watched.failed.append(f"{time.strftime('%H:%M:%S')} HTTP {answer.status}: {answer.message}")
        i += 1
        time.sleep(0.05)


def observe(plane: ControlPlane, watched: Watched) -> None:
    """Poll the webhook configurations, the serving Secret and the Lease."""
    api = plane.client()
    while not watched.stop.is_set():
        for path in CONFIGURATIONS:
            hooks = call(api, "GET", path).body.get("webhooks") or [{}]
            watched.note(watched.bundles[path], hooks[0].get("clientConfig", {}).get("caBundle", ""))
        watched.note(
            watched.serving, (call(api, "GET", TLS_SECRET).body.get("data") or {}).get("tls.crt", "")
        )
        watched.note(
            watched.holders, (call(api, "GET", LEASE).body.get("spec") or {}).get("holderIdentity", "")
        )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    rights = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["create"]}
    with control_plane.namespace(NS):
        control_plane.grant(NS, "tenant", [rights])
        with installed(control_plane, VALUES, replicas=2) as deployment:
            yield deployment


def certificates_in(bundle: str) -> int:
    return base64.b64decode(bundle).count(b"-----BEGIN CERTIFICATE-----")


def test_the_elected_replica_rolls_certificates_without_a_failed_admission(
    draguard: Draguard, control_plane: ControlPlane
) -> None:
    watched = Watched()
    threads = [threading.Thread(target=observe, args=(control_plane, watched), daemon=True)]
    threads += [
        threading.Thread(target=admissions, args=(control_plane, watched, w), daemon=True) for w in range(2)
    ]
    for thread in threads:
        thread.start()
    leading = -1
    try:
        # the CA announced (two CAs in the bundle) and retired (one again), with serving renewals
        rolled = wait_for(
            "a CA roll published to both webhook configurations",
            lambda: all(
                len(b) >= 3 and certificates_in(b[-1]) == 1 and max(map(certificates_in, b)) == 2
                for b in watched.bundles.values()
            ),
            timeout=90,
        )
        assert rolled
        leader = watched.holders[-1]
        names = [r.name for r in draguard.replica]
        assert leader in names, watched.holders
        leading = names.index(leader)
        assert (
            "CA Secret draguard-ca updated: CA due for renewal"
            in draguard.replica[leading].component.log.read_text()
        )
        other = 1 - leading
        assert "CA Secret draguard-ca updated" not in draguard.replica[other].component.log.read_text()
        # The leader goes away: it releases the Lease, the other replica takes over and rotates on.
        draguard.stop_replica(leading)
        wait_for(
            "the other replica to hold the Lease", lambda: watched.holders[-1] == names[other], timeout=30
        )
        renewed = len(watched.serving)
        wait_for("a serving renewal by the new leader", lambda: len(watched.serving) > renewed, timeout=30)
    finally:
        watched.stop.set()
        for thread in threads:
            thread.join(10)
        if leading >= 0:
            draguard.start_replica(leading)
    print(
        f"\ncertificate rotation e2e: {len(watched.serving)} serving certificates, "
        f"{[len(b) for b in watched.bundles.values()]} caBundles (validating, mutating), "
        f"Lease holders {watched.holders}; {watched.admitted} admissions, "
        f"failed admissions: {len(watched.failed)}"
    )
    assert watched.failed == [], watched.failed
    assert watched.admitted > 100
    assert len(watched.serving) >= 4
