"""certs.material: the leaf certificates a CA issues, for the serving port and for its callers."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.material import CertificateError, generate_ca, issue_client, issue_serving

NOW = dt.datetime(2026, 11, 24, 9, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_a_serving_certificate_names_its_hosts_and_serves_only() -> None:
    ca = generate_ca(NOW, 10 * DAY)
    cert = issue_serving(ca, ["draguard.draguard.svc", "127.0.0.1"], NOW, DAY).certificate
    cert.verify_directly_issued_by(ca.certificate)
    assert usages(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["draguard.draguard.svc"]
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    with pytest.raises(CertificateError, match="at least one host"):
        issue_serving(ca, [], NOW, DAY)


def test_a_client_certificate_carries_user_and_groups_as_kubernetes_reads_them() -> None:
    ca = generate_ca(NOW, 10 * DAY)
    cert = issue_client(ca, "ci-bot", ("platform", "dra-admins"), NOW, DAY).certificate
    cert.verify_directly_issued_by(ca.certificate)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "ci-bot"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "platform", "dra-admins",
    ]
    assert usages(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_no_leaf_outlives_its_ca() -> None:
    ca = generate_ca(NOW, DAY)
    for pair in (issue_serving(ca, ["h"], NOW, 30 * DAY), issue_client(ca, "u", (), NOW, 30 * DAY)):
        assert pair.certificate.not_valid_after_utc == ca.certificate.not_valid_after_utc
