"""Lease-based leader election through the real ``kubernetes`` client.

The HTTP server these tests talk to stands in for kube-apiserver, which cannot be installed
here: it keeps Leases in memory and enforces resourceVersion preconditions (409 Conflict), the
refusal of unconditional Lease updates and the MicroTime format, as kube-apiserver does.
"""

from __future__ import annotations

import datetime as dt

import pytest
from apiserver_standin import Apiserver
from kubernetes import client

from certs.kube import Kube
from certs.leader import LeaseConfig, LeaseElector, format_micro_time

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def elector(api_client: client.ApiClient, identity: str) -> LeaseElector:
    config = LeaseConfig(namespace="draguard", name="draguard-certs", identity=identity)
    return LeaseElector(Kube(api_client), config)


def lease(apiserver: Apiserver) -> dict:
    found = apiserver.store.get(apiserver.resource("Lease"), "draguard", "draguard-certs")
    assert found is not None
    return found


def test_first_replica_creates_the_lease_and_leads(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    assert elector(api_client, "pod-a").try_acquire_or_renew(T0)
    spec = lease(apiserver)["spec"]
    assert spec["holderIdentity"] == "pod-a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_second_replica_waits_while_the_holder_renews(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    assert a.try_acquire_or_renew(T0)
    for second in range(0, 60, 2):
        now = T0 + dt.timedelta(seconds=second)
        assert a.try_acquire_or_renew(now)
        assert not b.try_acquire_or_renew(now)
    assert lease(apiserver)["spec"]["holderIdentity"] == "pod-a"
    assert lease(apiserver)["spec"]["leaseTransitions"] == 0


def test_takeover_after_the_holder_stops_renewing(apiserver: Apiserver, api_client: client.ApiClient) -> None:
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))  # b first sees the record here
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=15))  # 14 s of b's clock: not yet
    assert b.try_acquire_or_renew(T0 + dt.timedelta(seconds=16))
    spec = lease(apiserver)["spec"]
    assert spec["holderIdentity"] == "pod-b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == format_micro_time(T0 + dt.timedelta(seconds=16))
    # The old leader comes back: the lease is b's and fresh, so a must not take it.
    assert not a.try_acquire_or_renew(T0 + dt.timedelta(seconds=17))


def test_expiry_is_judged_by_the_observer_clock_not_the_holder_renew_time(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    """A holder whose clock runs an hour behind still holds the lease while it keeps renewing."""
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    behind = dt.timedelta(hours=1)
    for second in range(0, 40, 2):
        now = T0 + dt.timedelta(seconds=second)
        assert a.try_acquire_or_renew(now - behind)
        assert not b.try_acquire_or_renew(now)


def test_a_lost_race_is_a_409_and_means_not_leader(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))
    lease_resource = apiserver.resource("Lease")

    def sneak_in(method: str, path: str, body: bytes) -> None:
        # Between b's read and b's write, a renews: b's write carries a stale resourceVersion.
        if method == "PUT" and path.endswith("/leases/draguard-certs"):
            apiserver.before = None
            current = apiserver.store.get(lease_resource, "draguard", "draguard-certs")
            assert current is not None
            apiserver.store.put(lease_resource, "draguard", current)

    apiserver.before = sneak_in
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=30))
    assert (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/draguard/leases/draguard-certs",
    ) in apiserver.requests
    assert lease(apiserver)["spec"]["holderIdentity"] == "pod-a"


def test_two_replicas_racing_to_create_only_one_wins(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    lease_resource = apiserver.resource("Lease")

    def create_first(method: str, path: str, body: bytes) -> None:
        if method == "POST":
            apiserver.before = None
            body = {"metadata": {"name": "draguard-certs"}, "spec": {"holderIdentity": "pod-a"}}
            apiserver.store.put(lease_resource, "draguard", body)

    apiserver.before = create_first
    assert not b.try_acquire_or_renew(T0)
    assert lease(apiserver)["spec"]["holderIdentity"] == "pod-a"
    assert a.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))  # the record names pod-a: it renews


def test_release_hands_over_at_once(apiserver: Apiserver, api_client: client.ApiClient) -> None:
    a, b = elector(api_client, "pod-a"), elector(api_client, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + dt.timedelta(seconds=1))
    a.release(T0 + dt.timedelta(seconds=2))
    assert lease(apiserver)["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew(T0 + dt.timedelta(seconds=3))


def test_stand_in_refuses_an_unconditional_lease_update(
    apiserver: Apiserver, api_client: client.ApiClient
) -> None:
    """The precondition is enforced by the server, so the elector's 409 handling is really exercised."""
    assert elector(api_client, "pod-a").try_acquire_or_renew(T0)
    body = lease(apiserver)
    del body["metadata"]["resourceVersion"]
    with pytest.raises(client.ApiException) as err:
        Kube(api_client).replace(
            "/apis/coordination.k8s.io/v1/namespaces/draguard/leases/draguard-certs", body
        )
    assert err.value.status == 422
    assert "must be specified for an update" in err.value.body


def test_configuration_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="POD_NAME"):
        LeaseConfig(namespace="draguard", name="x", identity="")
    with pytest.raises(ValueError, match="retry_period"):
        LeaseConfig("draguard", "x", "pod-a", dt.timedelta(seconds=2), dt.timedelta(seconds=2))
