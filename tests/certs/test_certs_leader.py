"""Lease-based leader election through the real ``kubernetes`` client and the real API server.

kube-apiserver keeps the Lease, enforces the resourceVersion precondition (409 Conflict), refuses
unconditional Lease updates and parses MicroTime; the races are made real by another client
writing between the elector's read and its write (``RecordingKube.before``). Times are the
electors' own (``now`` is an argument): the API server does not judge them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kube_recording import RecordingKube

from certs.kube import Kube, KubeApiError
from certs.leader import LeaseConfig, LeaseElector, format_micro_time

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAME = "draguard-certs"


def elector(kube: Kube, namespace: str, identity: str) -> LeaseElector:
    return LeaseElector(kube, LeaseConfig(namespace=namespace, name=NAME, identity=identity))


def path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{NAME}"


def lease(kube: Kube, namespace: str) -> dict[str, Any]:
    found = Kube(kube._api).get(path(namespace))
    assert found is not None
    return found


def test_first_replica_creates_the_lease_and_leads(kube: RecordingKube, kube_namespace: str) -> None:
    assert elector(kube, kube_namespace, "pod-a").try_acquire_or_renew(T0)
    spec = lease(kube, kube_namespace)["spec"]
    assert spec["holderIdentity"] == "pod-a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_second_replica_waits_while_the_holder_renews(kube: RecordingKube, kube_namespace: str) -> None:
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    assert a.try_acquire_or_renew(T0)
    for second in range(0, 60, 2):
        now = T0 + dt.timedelta(seconds=second)
        assert a.try_acquire_or_renew(now)
        assert not b.try_acquire_or_renew(now)
    assert lease(kube, kube_namespace)["spec"]["holderIdentity"] == "pod-a"
    assert lease(kube, kube_namespace)["spec"]["leaseTransitions"] == 0


def test_takeover_after_the_holder_stops_renewing(kube: RecordingKube, kube_namespace: str) -> None:
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))  # b first sees the record here
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=15))  # 14 s of b's clock: not yet
    assert b.try_acquire_or_renew(T0 + dt.timedelta(seconds=16))
    spec = lease(kube, kube_namespace)["spec"]
    assert spec["holderIdentity"] == "pod-b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == format_micro_time(T0 + dt.timedelta(seconds=16))
    # The old leader comes back: the lease is b's and fresh, so a must not take it.
    assert not a.try_acquire_or_renew(T0 + dt.timedelta(seconds=17))


def test_expiry_is_judged_by_the_observer_clock_not_the_holder_renew_time(
    kube: RecordingKube, kube_namespace: str
) -> None:
    """A holder whose clock runs an hour behind still holds the lease while it keeps renewing."""
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    behind = dt.timedelta(hours=1)
    for second in range(0, 40, 2):
        now = T0 + dt.timedelta(seconds=second)
        assert a.try_acquire_or_renew(now - behind)
        assert not b.try_acquire_or_renew(now)


def test_a_lost_race_is_a_409_and_means_not_leader(kube: RecordingKube, kube_namespace: str) -> None:
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))
    other = Kube(kube._api)

    def sneak_in(method: str, where: str, body: dict[str, Any] | None) -> None:
        # Between b's read and b's write, a renews: b's write carries a stale resourceVersion. (A
        # write that changes nothing would not do: the API server keeps the resourceVersion.)
        if method == "PUT" and where == path(kube_namespace):
            kube.before = None
            renewed = lease(kube, kube_namespace)
            renewed["spec"]["renewTime"] = format_micro_time(T0 + dt.timedelta(seconds=29))
            other.replace(where, renewed)

    kube.before = sneak_in
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=30))
    assert ("PUT", path(kube_namespace)) in kube.requests
    assert lease(kube, kube_namespace)["spec"]["holderIdentity"] == "pod-a"


def test_two_replicas_racing_to_create_only_one_wins(kube: RecordingKube, kube_namespace: str) -> None:
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    other = Kube(kube._api)

    def create_first(method: str, where: str, body: dict[str, Any] | None) -> None:
        if method == "POST":
            kube.before = None
            spec = {"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "renewTime": format_micro_time(T0)}
            other.create(
                where,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": NAME},
                    "spec": spec,
                },
            )

    kube.before = create_first
    assert not b.try_acquire_or_renew(T0)
    assert lease(kube, kube_namespace)["spec"]["holderIdentity"] == "pod-a"
    assert a.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))  # the record names pod-a: it renews


def test_release_hands_over_at_once(kube: RecordingKube, kube_namespace: str) -> None:
    a, b = elector(kube, kube_namespace, "pod-a"), elector(kube, kube_namespace, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))
    a.release(T0 + dt.timedelta(seconds=2))
    assert lease(kube, kube_namespace)["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew(T0 + dt.timedelta(seconds=3))


def test_the_api_server_refuses_an_unconditional_lease_update(
    kube: RecordingKube, kube_namespace: str
) -> None:
    """The precondition is enforced by the server, so the elector's 409 handling is really exercised."""
    assert elector(kube, kube_namespace, "pod-a").try_acquire_or_renew(T0)
    body = lease(kube, kube_namespace)
    del body["metadata"]["resourceVersion"]
    with pytest.raises(KubeApiError) as err:
        Kube(kube._api).replace(path(kube_namespace), body)
    assert err.value.status == 422
    assert "must be specified for an update" in err.value.body


def test_configuration_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="POD_NAME"):
        LeaseConfig(namespace="draguard", name="x", identity="")
    with pytest.raises(ValueError, match="retry_period"):
        LeaseConfig("draguard", "x", "pod-a", dt.timedelta(seconds=2), dt.timedelta(seconds=2))


def test_an_api_server_that_is_away_is_an_api_error_the_rotation_loop_retries() -> None:
    """Connection refused (an API server restarting) is a KubeApiError with status 0, which
    ``certs.controller.run`` logs and retries; it was urllib3's MaxRetryError, which ended the
    rotation thread for good (benchmarks/soak.py, an API server restart)."""
    from controlplane import free_port
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    configuration.retries = 0
    with pytest.raises(KubeApiError) as err:
        Kube(client.ApiClient(configuration)).get(path("draguard"))
    assert err.value.status == 0
    assert "Connection refused" in err.value.body, err.value.body
