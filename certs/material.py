"""TLS material for the webhook: a private CA, serving certificates it signs, and checks on pairs.

Everything here is a function of its arguments (time comes in as ``now``), so the rotation
planner and the tests can reason about validity windows without sleeping. Keys default to
ECDSA P-256: small, fast to generate (milliseconds, which keeps rotation and tests cheap) and
accepted by every kube-apiserver; RSA stays selectable for environments that insist on it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes, PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Certificates start a little in the past so that a replica or API server whose clock runs
# slightly behind the leader's does not see a "not yet valid" certificate right after rotation.
BACKDATE = dt.timedelta(minutes=5)


class CertificateError(ValueError):
    """TLS material that must not be served: unreadable, expired, not yet valid or mismatched."""


class NotYetValid(CertificateError):
    """A pair that is fine but whose certificate starts later (``not_before``): fit to serve then.

    Usually clock skew: the issuer's clock runs ahead of ours by more than the backdating.
    """

    def __init__(self, message: str, not_before: dt.datetime) -> None:
        super().__init__(message)
        self.not_before = not_before


class KeyAlgorithm(StrEnum):
    """Key types we generate; the value is the spelling used on the command line and in config."""

    ECDSA_P256 = "ecdsa-p256"
    ECDSA_P384 = "ecdsa-p384"
    RSA_2048 = "rsa-2048"
    RSA_3072 = "rsa-3072"

    def generate(self) -> CertificateIssuerPrivateKeyTypes:
        if self is KeyAlgorithm.ECDSA_P256:
            return ec.generate_private_key(ec.SECP256R1())
        if self is KeyAlgorithm.ECDSA_P384:
            return ec.generate_private_key(ec.SECP384R1())
        bits = 2048 if self is KeyAlgorithm.RSA_2048 else 3072
        return rsa.generate_private_key(public_exponent=65537, key_size=bits)


@dataclass(frozen=True)
class KeyPair:
    """A certificate (PEM, possibly followed by its chain) and its private key (PEM, PKCS#8)."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificates(self.cert_pem)[0]


def service_hosts(service: str, namespace: str, extra: Iterable[str] = ()) -> list[str]:
    """The names a webhook Service answers to, most specific first, without duplicates.

    The API server dials ``<service>.<namespace>.svc``; ``.svc.cluster.local`` covers clients
    that use the fully qualified name. ``extra`` adds hosts such as ``localhost``/``127.0.0.1``
    for local runs.
    """
    hosts = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", *extra]
    return list(dict.fromkeys(h for h in hosts if h))


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _pem_key(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _serial() -> int:
    # Positive and under 2**159, as RFC 5280 allows at most 20 octets.
    return int.from_bytes(os.urandom(19), "big") | 1


def generate_ca(
    now: dt.datetime, validity: dt.timedelta, algorithm: KeyAlgorithm = KeyAlgorithm.ECDSA_P256
) -> KeyPair:
    """A self-signed CA that may only sign leaf certificates (path length 0).

    The common name carries the creation time so that the old and new CA of a rollover are
    told apart in logs and by ``openssl x509 -subject``; chain building itself relies on the key
    identifiers, not the name.
    """
    key = algorithm.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"draguard-ca@{int(now.timestamp())}")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True, rsa_key=False), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _key_usage(ca: bool, rsa_key: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=rsa_key and not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def issue_serving(
    ca: KeyPair,
    hosts: Sequence[str],
    now: dt.datetime,
    validity: dt.timedelta,
    algorithm: KeyAlgorithm = KeyAlgorithm.ECDSA_P256,
) -> KeyPair:
    """A server certificate for ``hosts`` signed by ``ca``."""
    if not hosts:
        raise CertificateError("a serving certificate needs at least one host name or IP address")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    return _issue(ca, subject, ExtendedKeyUsageOID.SERVER_AUTH, _san(hosts), now, validity, algorithm)


def issue_client(
    ca: KeyPair,
    user: str,
    groups: Sequence[str],
    now: dt.datetime,
    validity: dt.timedelta,
    algorithm: KeyAlgorithm = KeyAlgorithm.ECDSA_P256,
) -> KeyPair:
    """A client certificate for ``user`` in ``groups`` (CN and O, as Kubernetes reads them) signed by
    ``ca``: how a caller of the dry-run endpoint proves who it is to ``--dryrun-client-ca``."""
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, user),
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups),
        ]
    )
    return _issue(ca, subject, ExtendedKeyUsageOID.CLIENT_AUTH, None, now, validity, algorithm)


def _issue(
    ca: KeyPair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    san: x509.SubjectAlternativeName | None,
    now: dt.datetime,
    validity: dt.timedelta,
    algorithm: KeyAlgorithm,
) -> KeyPair:
    """A leaf certificate signed by ``ca``. It never outlives its CA: a leaf valid past its issuer's
    expiry would fail verification anyway, and capping it makes the renewal planner renew it before
    the CA goes away."""
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError("the CA key must be an ECDSA or RSA key")
    key = algorithm.generate()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False, rsa_key=isinstance(key, rsa.RSAPrivateKey)), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(authority, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _spki(public_key: PublicKeyTypes) -> bytes:
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    return public_key.public_bytes(serialization.Encoding.DER, spki)


def check_pair(pair: KeyPair, now: dt.datetime, what: str = "certificate") -> x509.Certificate:
    """Return the leaf certificate of ``pair`` if it is fit to serve at ``now``.

    Refuses, with a message that says what is wrong and with which dates, a pair whose PEM does
    not parse, whose certificate is expired or not yet valid (:class:`NotYetValid`), or whose key
    does not belong to the certificate. This runs before a new pair replaces a working one, so a
    half-written or wrong Secret never takes the webhook down.
    """
    try:
        cert = x509.load_pem_x509_certificates(pair.cert_pem)[0]
    except ValueError as err:
        raise CertificateError(f"{what}: not a PEM certificate ({err})") from None
    try:
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
    except (ValueError, TypeError) as err:
        raise CertificateError(f"{what}: private key is not an unencrypted PEM key ({err})") from None
    if now >= cert.not_valid_after_utc:
        raise CertificateError(
            f"{what}: expired at {cert.not_valid_after_utc.isoformat()} (now {now.isoformat()})"
        )
    if _spki(key.public_key()) != _spki(cert.public_key()):
        raise CertificateError(
            f"{what}: private key does not match the certificate (subject {cert.subject.rfc4514_string()})"
        )
    # Last, so that NotYetValid means "this pair will be fine at not_before", nothing else.
    if now < cert.not_valid_before_utc:
        raise NotYetValid(
            f"{what}: not valid before {cert.not_valid_before_utc.isoformat()} (now {now.isoformat()})",
            cert.not_valid_before_utc,
        )
    return cert


def parse_bundle(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle, in order; an empty bundle is an empty list."""
    return x509.load_pem_x509_certificates(pem) if pem.strip() else []


def make_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    """A PEM bundle of ``certs`` in the given order, each certificate once."""
    seen: dict[bytes, bytes] = {}
    for cert in certs:
        seen.setdefault(cert.fingerprint(hashes.SHA256()), cert.public_bytes(serialization.Encoding.PEM))
    return b"".join(seen.values())


def bundle_contains(bundle_pem: bytes, cert: x509.Certificate) -> bool:
    """Whether ``bundle_pem`` holds ``cert`` (compared by fingerprint)."""
    wanted = cert.fingerprint(hashes.SHA256())
    return any(c.fingerprint(hashes.SHA256()) == wanted for c in parse_bundle(bundle_pem))
