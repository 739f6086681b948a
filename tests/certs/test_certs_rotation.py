"""Renewal timing and the CA roll, decided by the pure planner (time is an argument)."""

from __future__ import annotations

import datetime as dt

import pytest

from certs.material import generate_ca, issue_serving, parse_bundle
from certs.rotation import CaState, RotationPolicy, bootstrap_ca, next_check, plan_ca, plan_serving

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HOSTS = ("draguard.draguard.svc", "draguard.draguard.svc.cluster.local")
POLICY = RotationPolicy(hosts=HOSTS)
DAY = dt.timedelta(days=1)


def test_default_renewal_is_at_two_thirds_of_the_life_the_certificate_was_issued_for() -> None:
    ca = generate_ca(T0, dt.timedelta(days=30))
    cert = issue_serving(ca, HOSTS, T0, dt.timedelta(days=9)).certificate
    # notBefore is backdated 5 minutes for clock skew; the life counts from the issue, T0.
    assert cert.not_valid_before_utc == T0 - dt.timedelta(minutes=5)
    assert POLICY.renewal_time(cert) == T0 + 6 * DAY


@pytest.mark.parametrize(
    "lifetime", [dt.timedelta(seconds=15), dt.timedelta(seconds=30), dt.timedelta(minutes=2)]
)
def test_a_short_lived_certificate_is_not_due_the_moment_it_is_made(lifetime: dt.timedelta) -> None:
    """Counted from the backdated notBefore, two thirds of a life shorter than a few minutes had
    passed at issue, and the controller replaced the certificate on every round (seen on the real API
    server with the chart's tls.selfManaged lifetimes in seconds)."""
    ca = bootstrap_ca(T0, RotationPolicy(hosts=HOSTS, ca_validity=lifetime))
    assert POLICY.renewal_time(ca.signing.certificate) == T0 + lifetime * 2 / 3
    pair = issue_serving(ca.signing, HOSTS, T0, lifetime)
    assert POLICY.renewal_time(pair.certificate) == T0 + lifetime * 2 / 3
    assert plan_serving(pair, ca, T0 + lifetime / 2, POLICY).reason is None


def test_renew_fraction_and_renew_before_are_configurable() -> None:
    ca = generate_ca(T0, dt.timedelta(days=30))
    cert = issue_serving(ca, HOSTS, T0, dt.timedelta(days=10)).certificate
    half = RotationPolicy(hosts=HOSTS, renew_fraction=0.5)
    assert half.renewal_time(cert) == T0 + 5 * DAY
    lead = RotationPolicy(hosts=HOSTS, renew_before=dt.timedelta(days=3))
    assert lead.renewal_time(cert) == cert.not_valid_after_utc - dt.timedelta(days=3)
    # A lead time longer than the whole life must not mean "renew forever": halfway instead.
    too_long = RotationPolicy(hosts=HOSTS, renew_before=dt.timedelta(days=20))
    assert too_long.renewal_time(cert) == half.renewal_time(cert)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("renew_fraction", 1.0, "renew_fraction must be between 0 and 1"),
        ("renew_fraction", 0.0, "renew_fraction must be between 0 and 1"),
        ("renew_before", dt.timedelta(0), "renew_before must be positive"),
        ("overlap", dt.timedelta(seconds=-1), "overlap must not be negative"),
        ("hosts", (), "hosts must name"),
    ],
)
def test_bad_policy_is_refused_naming_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RotationPolicy(**{"hosts": HOSTS, field: value})  # type: ignore[arg-type]


def test_serving_certificate_is_kept_until_due_then_renewed() -> None:
    ca = bootstrap_ca(T0, POLICY)
    first = plan_serving(None, ca, T0, POLICY)
    assert first.reason == "no serving certificate yet"
    due = POLICY.renewal_time(first.pair.certificate)
    assert plan_serving(first.pair, ca, due - dt.timedelta(seconds=1), POLICY).reason is None
    assert plan_serving(first.pair, ca, due - dt.timedelta(seconds=1), POLICY).pair is first.pair
    renewed = plan_serving(first.pair, ca, due, POLICY)
    assert renewed.reason is not None and "due for renewal" in renewed.reason
    assert renewed.pair.certificate.not_valid_after_utc > first.pair.certificate.not_valid_after_utc


def test_serving_certificate_is_reissued_when_hosts_change() -> None:
    ca = bootstrap_ca(T0, POLICY)
    pair = plan_serving(None, ca, T0, POLICY).pair
    wider = RotationPolicy(hosts=(*HOSTS, "localhost", "127.0.0.1"))
    step = plan_serving(pair, ca, T0 + DAY, wider)
    assert step.reason is not None and "wanted" in step.reason
    assert "127.0.0.1" in step.reason


def test_serving_certificate_never_outlives_its_ca() -> None:
    policy = RotationPolicy(
        hosts=HOSTS, ca_validity=dt.timedelta(days=10), serving_validity=dt.timedelta(days=90)
    )
    ca = bootstrap_ca(T0, policy)
    pair = plan_serving(None, ca, T0, policy).pair
    assert pair.certificate.not_valid_after_utc == ca.signing.certificate.not_valid_after_utc


def roll(policy: RotationPolicy) -> list[tuple[str, dt.datetime, CaState]]:
    """Walk a CA through its roll, publishing every bundle at once; return each step taken."""
    state = bootstrap_ca(T0, policy)
    steps = []
    now = T0
    for _ in range(2000):
        now += dt.timedelta(hours=6)
        step = plan_ca(state, now, policy, published=True)
        if step.reason is not None:
            steps.append((step.reason, now, step.state))
            state = step.state
        if len(steps) == 3:
            break
    return steps


def test_ca_roll_announces_at_renewal_time_then_promotes_then_retires_after_overlaps() -> None:
    policy = RotationPolicy(hosts=HOSTS, overlap=dt.timedelta(days=1))
    first = bootstrap_ca(T0, policy)
    renew_at = policy.renewal_time(first.signing.certificate)
    (announce, t1, s1), (promote, t2, s2), (retire, t3, s3) = roll(policy)
    assert "announced" in announce and renew_at <= t1 < renew_at + dt.timedelta(hours=6)
    assert s1.next is not None and len(parse_bundle(s1.bundle)) == 2
    assert "promoted" in promote and t2 - t1 >= policy.overlap
    assert s2.signing == s1.next and s2.next is None
    assert [c.serial_number for c in parse_bundle(s2.bundle)] == [
        s1.next.certificate.serial_number,
        s1.signing.certificate.serial_number,
    ]
    assert "retired" in retire and t3 - t2 >= policy.overlap
    assert [c.serial_number for c in parse_bundle(s3.bundle)] == [s2.signing.certificate.serial_number]


def test_promotion_waits_for_the_bundle_to_be_published() -> None:
    policy = RotationPolicy(hosts=HOSTS)
    state = bootstrap_ca(T0, policy)
    at = policy.renewal_time(state.signing.certificate)
    announced = plan_ca(state, at, policy, published=True).state
    later = at + 10 * policy.overlap
    held = plan_ca(announced, later, policy, published=False)
    assert held.reason is None and held.state.signing == state.signing
    assert plan_ca(announced, later, policy, published=True).state.signing == announced.next


def test_serving_certificate_moves_to_the_new_ca_on_promotion() -> None:
    policy = RotationPolicy(hosts=HOSTS)
    state = bootstrap_ca(T0, policy)
    at = policy.renewal_time(state.signing.certificate)
    announced = plan_ca(state, at, policy, published=True).state
    serving = plan_serving(None, announced, at, policy).pair
    assert plan_serving(serving, announced, at + dt.timedelta(minutes=1), policy).reason is None
    promoted = plan_ca(announced, at + policy.overlap, policy, published=True).state
    step = plan_serving(serving, promoted, at + policy.overlap, policy)
    assert step.reason == "serving certificate was issued by a CA that no longer signs"
    step.pair.certificate.verify_directly_issued_by(promoted.signing.certificate)


def test_an_expired_ca_is_replaced_at_once() -> None:
    policy = RotationPolicy(hosts=HOSTS, ca_validity=dt.timedelta(days=10))
    state = bootstrap_ca(T0, policy)
    step = plan_ca(state, T0 + 11 * DAY, policy, published=False)
    assert step.reason is not None and "expired" in step.reason
    assert step.state.signing.certificate.not_valid_after_utc > T0 + 11 * DAY


def test_next_check_is_the_earliest_pending_moment() -> None:
    state = bootstrap_ca(T0, POLICY)
    serving = plan_serving(None, state, T0, POLICY).pair
    assert next_check(state, serving, POLICY) == POLICY.renewal_time(serving.certificate)
    at = POLICY.renewal_time(state.signing.certificate)
    announced = plan_ca(state, at, POLICY, published=True).state
    fresh = plan_serving(None, announced, at, POLICY).pair
    assert next_check(announced, fresh, POLICY) == at + POLICY.overlap
