"""The ``certificates`` config section: defaults, durations and errors that name the field."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from kubernetes import client

from certs.kube import Kube
from certs.settings import CertSettings, SettingsError, parse_duration, start_rotation

BASE = {"service": "draguard", "namespace": "gpu-system"}


def test_defaults_follow_the_chart() -> None:
    settings = CertSettings.from_mapping({**BASE, "validatingWebhookConfiguration": "draguard"})
    assert settings.mode == "selfManaged"
    assert settings.targets.validating == ("draguard",) and settings.targets.mutating == ()
    assert settings.targets.ca_secret == "draguard-ca" and settings.targets.tls_secret == "draguard-tls"
    assert settings.policy.hosts == ("draguard.gpu-system.svc", "draguard.gpu-system.svc.cluster.local")
    assert settings.policy.ca_validity == dt.timedelta(days=365)
    assert settings.policy.serving_validity == dt.timedelta(days=90)
    assert settings.policy.renew_fraction == pytest.approx(2 / 3)
    assert settings.lease_name == "draguard-certs"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8760h", dt.timedelta(days=365)),
        ("1h30m", dt.timedelta(minutes=90)),
        ("45s", dt.timedelta(seconds=45)),
    ],
)
def test_go_style_durations(text: str, expected: dt.timedelta) -> None:
    assert parse_duration(text, "x") == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"mode": "auto"}, "certificates.mode: 'auto' is not one of selfManaged, certManager, secret"),
        ({"overlap": "1d"}, "certificates.overlap: '1d' is not a duration"),
        ({"renewBefore": "soon"}, "certificates.renewBefore: 'soon' is not a duration"),
        ({"renewFraction": 1.5}, "renew_fraction must be between 0 and 1"),
        ({"keyAlgorithm": "dsa"}, "certificates.keyAlgorithm: 'dsa' is not one of ecdsa-p256"),
        ({"caValidty": "1h"}, "unknown field(s) caValidty"),
        ({"service": ""}, "certificates.service: required"),
    ],
)
def test_bad_values_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        CertSettings.from_mapping({**BASE, **raw})
    assert message in str(err.value)


def test_only_self_managed_mode_rotates() -> None:
    settings = CertSettings.from_mapping({**BASE, "mode": "certManager"})
    with pytest.raises(SettingsError, match="does not rotate"):
        start_rotation(settings, client.ApiClient(), "pod-a")


def test_start_rotation_writes_the_secrets_and_stops_cleanly(
    api_client: client.ApiClient, kube_namespace: str
) -> None:
    settings = CertSettings.from_mapping({**BASE, "namespace": kube_namespace})
    tls = f"/api/v1/namespaces/{kube_namespace}/secrets/draguard-tls"
    thread, stop = start_rotation(settings, api_client, "pod-a")
    try:
        deadline = threading.Event()
        for _ in range(500):
            if Kube(api_client).get(tls) is not None:
                break
            deadline.wait(0.02)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert Kube(api_client).get(tls) is not None
