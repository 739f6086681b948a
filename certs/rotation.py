"""When to renew the serving certificate and how to roll the CA without a moment of distrust.

This module only decides; :mod:`certs.controller` reads and writes the Secrets and webhook
configurations. Keeping the decisions pure (time comes in as ``now``) lets the tests walk a CA
through a whole year of its life in milliseconds.

The CA rolls in three steps, each at least ``overlap`` apart, so the API server (whose caBundle
is what we publish) never meets a serving certificate it does not trust:

1. *announce*: a new CA is generated and added to the bundle; the old CA keeps signing.
2. *promote*: once the bundle with the new CA is published on every webhook configuration, the
   new CA signs and the serving certificate is re-issued from it; the old CA stays in the bundle
   because replicas that have not yet reloaded still present certificates it signed.
3. *retire*: the old CA leaves the bundle.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from certs.material import (
    BACKDATE,
    CertificateError,
    KeyAlgorithm,
    KeyPair,
    check_pair,
    generate_ca,
    issue_serving,
    make_bundle,
)


@dataclass(frozen=True)
class RotationPolicy:
    """Lifetimes and timing of self-managed certificates.

    Renewal happens at ``renew_fraction`` of a certificate's life unless ``renew_before`` asks for
    a fixed lead time before expiry. The two-thirds default leaves a third of the life (30 days
    for the 90-day serving certificate) to notice and fix a rotation that keeps failing.
    """

    hosts: tuple[str, ...]
    ca_validity: dt.timedelta = dt.timedelta(days=365)
    serving_validity: dt.timedelta = dt.timedelta(days=90)
    renew_fraction: float = 2 / 3
    renew_before: dt.timedelta | None = None
    overlap: dt.timedelta = dt.timedelta(hours=1)
    algorithm: KeyAlgorithm = KeyAlgorithm.ECDSA_P256

    def __post_init__(self) -> None:
        if not 0 < self.renew_fraction < 1:
            raise ValueError(f"renew_fraction must be between 0 and 1 (exclusive), got {self.renew_fraction}")
        if self.renew_before is not None and self.renew_before <= dt.timedelta(0):
            raise ValueError(f"renew_before must be positive, got {self.renew_before}")
        if self.overlap < dt.timedelta(0):
            raise ValueError(f"overlap must not be negative, got {self.overlap}")
        if not self.hosts:
            raise ValueError("hosts must name at least the webhook Service's DNS name")

    def renewal_time(self, cert: x509.Certificate) -> dt.datetime:
        """The moment ``cert`` is due for replacement.

        Its life counts from when it was issued, ``BACKDATE`` after its notBefore (backdated for
        clock skew): counted from notBefore, a certificate living less than a few times
        ``BACKDATE`` was due the moment it was made, and rotated again on every round.
        A fixed ``renew_before`` longer than the certificate's life would mean "renew at once,
        forever"; such a certificate is renewed halfway through its life instead.
        """
        end = cert.not_valid_after_utc
        start = min(cert.not_valid_before_utc + BACKDATE, end)
        if self.renew_before is not None and self.renew_before < end - start:
            return end - self.renew_before
        fraction = self.renew_fraction if self.renew_before is None else 0.5
        return start + (end - start) * fraction


@dataclass(frozen=True)
class CaState:
    """The CAs a deployment knows about: the one that signs, an announced successor, retirees.

    ``bundle`` is what clients (the API server through caBundle) must trust right now.
    """

    signing: KeyPair
    next: KeyPair | None = None
    next_since: dt.datetime | None = None
    retiring: tuple[x509.Certificate, ...] = field(default=())
    retiring_since: dt.datetime | None = None

    @property
    def bundle(self) -> bytes:
        certs = [self.signing.certificate]
        if self.next is not None:
            certs.append(self.next.certificate)
        return make_bundle([*certs, *self.retiring])


@dataclass(frozen=True)
class Step:
    """The outcome of one planning step: the new value and why it changed (``None``: unchanged)."""

    reason: str | None


@dataclass(frozen=True)
class CaStep(Step):
    state: CaState


@dataclass(frozen=True)
class ServingStep(Step):
    pair: KeyPair


def bootstrap_ca(now: dt.datetime, policy: RotationPolicy) -> CaState:
    return CaState(signing=generate_ca(now, policy.ca_validity, policy.algorithm))


def plan_ca(state: CaState, now: dt.datetime, policy: RotationPolicy, published: bool) -> CaStep:
    """Advance the CA roll by at most one step.

    ``published`` tells whether every webhook configuration already carries ``state.bundle``;
    promotion waits for it, because promoting earlier is exactly what would make the API server
    see a certificate signed by a CA it does not know yet.
    """
    signing = state.signing.certificate
    if now >= signing.not_valid_after_utc:
        # Nothing to overlap with: the old CA is useless already. Start over and say so loudly.
        fresh = bootstrap_ca(now, policy)
        return CaStep(f"signing CA expired at {signing.not_valid_after_utc.isoformat()}; new CA", fresh)
    retiring = tuple(c for c in state.retiring if now < c.not_valid_after_utc)
    if state.retiring_since is not None and retiring and now >= state.retiring_since + policy.overlap:
        retiring = ()
    if retiring != state.retiring:
        since = state.retiring_since if retiring else None
        return CaStep(
            "old CA retired from the bundle", replace(state, retiring=retiring, retiring_since=since)
        )
    if state.next is None:
        if now >= policy.renewal_time(signing):
            successor = generate_ca(now, policy.ca_validity, policy.algorithm)
            return CaStep(
                "CA due for renewal: new CA announced", replace(state, next=successor, next_since=now)
            )
        return CaStep(None, state)
    assert state.next_since is not None
    if now >= state.next_since + policy.overlap and published:
        promoted = CaState(signing=state.next, retiring=(*state.retiring, signing), retiring_since=now)
        return CaStep("announced CA promoted to signing CA", promoted)
    return CaStep(None, state)


def plan_serving(
    current: KeyPair | None, ca: CaState, now: dt.datetime, policy: RotationPolicy
) -> ServingStep:
    """Keep ``current`` unless it is missing, unusable, due, for other hosts or from another CA."""
    reason = _serving_problem(current, ca, now, policy)
    if reason is None:
        assert current is not None
        return ServingStep(None, current)
    pair = issue_serving(ca.signing, policy.hosts, now, policy.serving_validity, policy.algorithm)
    return ServingStep(reason, pair)


def _serving_problem(
    current: KeyPair | None, ca: CaState, now: dt.datetime, policy: RotationPolicy
) -> str | None:
    if current is None:
        return "no serving certificate yet"
    try:
        cert = check_pair(current, now, "serving certificate")
    except CertificateError as err:
        return str(err)
    if now >= policy.renewal_time(cert):
        return f"serving certificate due for renewal (expires {cert.not_valid_after_utc.isoformat()})"
    if not _issued_by(cert, ca.signing.certificate):
        return "serving certificate was issued by a CA that no longer signs"
    if sorted(_hosts(cert)) != sorted(policy.hosts):
        return f"serving certificate names {sorted(_hosts(cert))}, wanted {sorted(policy.hosts)}"
    return None


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    # A signature check, not a name comparison: two CAs made in the same second share a name.
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _hosts(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [
        *san.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
    ]


def next_check(ca: CaState, serving: KeyPair, policy: RotationPolicy) -> dt.datetime:
    """The earliest moment at which :func:`plan_ca` or :func:`plan_serving` could act again.

    The controller also re-checks on a fixed interval (a Secret may be edited by hand), but this
    lets it sleep no longer than needed.
    """
    moments = [policy.renewal_time(serving.certificate)]
    if ca.next_since is None:
        moments.append(policy.renewal_time(ca.signing.certificate))
    else:
        moments.append(ca.next_since + policy.overlap)
    if ca.retiring_since is not None:
        moments.append(ca.retiring_since + policy.overlap)
    return min(moments)
