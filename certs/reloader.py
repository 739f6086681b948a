"""Serve whatever certificate is on disk now, without a restart and without dropping a request.

The webhook's serving pair lives in a Secret volume that the kubelet refreshes in place when
the leader (or cert-manager, or an admin) writes a new certificate. The DRA driver webhooks read
their certificate once at start-up and serve it until it expires; this one notices the change.

How the swap works, and why this way: the server socket gets one *outer* ``ssl.SSLContext``
whose ``sni_callback`` runs at the start of every handshake (with or without SNI from the
client) and points the connection at the *current* inner context, which carries the certificate.
A reload builds a complete new inner context first and replaces the reference only if it loaded
cleanly, so:

* the next handshake presents the new certificate, with no listener restart;
* connections already established keep the session they negotiated, nothing is dropped;
* a broken pair (expired, not yet valid, key of another certificate, half-written file) is
  refused with a log line that says why, and the previous pair keeps serving. A pair refused as
  *not yet valid* (usually clock skew between the issuer and this replica) is checked again once
  its notBefore has passed; any other refusal stands until the files change.

Calling ``load_cert_chain`` on the live context instead would install the certificate before the
key is checked, leaving a mismatched pair in use if the key turns out wrong, and it mutates a
context that concurrent handshakes are reading.

Files are compared by content digest, not modification time: the kubelet swaps a symlink, editors
and ``cp`` keep or reset times unpredictably, and the files are a few kilobytes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509

from certs.material import CertificateError, KeyPair, NotYetValid, check_pair

log = logging.getLogger(__name__)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _base_context(minimum_version: ssl.TLSVersion, client_ca_file: str | None) -> ssl.SSLContext:
    """Protocol settings shared by the outer and every inner context.

    They must agree: the protocol version is fixed by the outer context before the callback
    swaps in the inner one, which contributes the certificate. Client certificates too: OpenSSL
    takes the verify mode from the outer context but the trust store from the inner one, so both
    ask for a certificate (optional: the API server presents none) and trust ``client_ca_file``.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = minimum_version
    if client_ca_file is not None:
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cafile=client_ca_file)
    return context


@dataclass(frozen=True)
class Served:
    """The pair currently served: its files' digest, its certificate and the context that carries it."""

    digest: str
    certificate: x509.Certificate
    context: ssl.SSLContext

    @property
    def not_after(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc


class CertReloader:
    """Holds the current serving context and replaces it when the files change."""

    def __init__(
        self,
        cert_file: str,
        key_file: str,
        minimum_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
        clock: Callable[[], dt.datetime] = _utcnow,
        client_ca_file: str | None = None,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._minimum_version = minimum_version
        # Clients presenting a certificate must present one this CA bundle verifies (read when a
        # serving pair loads); None: client certificates are not asked for.
        self.client_ca_file = client_ca_file
        self._clock = clock
        self._served: Served | None = None
        # The files last decided on (served, or refused for good): not looked at again.
        self._last_digest: str | None = None
        # A pair refused as not yet valid, and from when it is: looked at again from then on.
        self._waiting: tuple[str, dt.datetime] | None = None
        # The last refusal logged, so that a refused pair is reported once, not on every poll.
        self._logged: str | None = None
        # Why the files as they are now can never be served (None: they can, or may yet be).
        self.refusal: str | None = None
        self._outer = _base_context(minimum_version, client_ca_file)
        self._outer.sni_callback = self._select

    @classmethod
    def from_dir(
        cls,
        cert_dir: str,
        minimum_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
        client_ca_file: str | None = None,
    ) -> CertReloader:
        """The ``tls.crt``/``tls.key`` layout of a ``kubernetes.io/tls`` Secret volume."""
        return cls(
            os.path.join(cert_dir, "tls.crt"),
            os.path.join(cert_dir, "tls.key"),
            minimum_version,
            client_ca_file=client_ca_file,
        )

    @property
    def server_context(self) -> ssl.SSLContext:
        """The context to give the listening socket (``aiohttp.web.TCPSite(ssl_context=...)``).

        It stays the same object for the life of the server; what it presents changes.
        """
        return self._outer

    @property
    def served(self) -> Served | None:
        """The pair in use, ``None`` until a valid pair has loaded (readiness stays false)."""
        return self._served

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> int | None:
        served = self._served
        if served is None:
            return ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE
        connection.context = served.context
        return None

    def _read(self) -> KeyPair | None:
        """Both files, or ``None`` if the certificate changed while we read (a rewrite in progress)."""
        with open(self.cert_file, "rb") as f:
            cert = f.read()
        with open(self.key_file, "rb") as f:
            key = f.read()
        with open(self.cert_file, "rb") as f:
            if f.read() != cert:
                return None
        return KeyPair(cert, key)

    def reload(self) -> bool:
        """Load the files if their content changed; True when a new pair is now served.

        A pair that cannot be served is logged once (not on every poll) and otherwise ignored;
        one that is only not valid yet is loaded by the first call after its notBefore.
        """
        try:
            pair = self._read()
        except OSError as err:
            self._refuse(f"cannot read {err.filename}: {err.strerror}", f"unreadable: {err}")
            return False
        if pair is None:
            return False
        digest = hashlib.sha256(pair.cert_pem + b"\0" + pair.key_pem).hexdigest()
        if digest == self._last_digest:
            return False
        waiting = self._waiting
        if waiting is not None and waiting[0] == digest and self._clock() < waiting[1]:
            return False  # still early
        try:
            served = self._load(pair, digest)
        except NotYetValid as err:
            if self._unchanged(pair):
                self._waiting = (digest, err.not_before)
                self._refuse(f"{err}; will retry then", digest, final=False)
            return False
        except CertificateError as err:
            if self._unchanged(pair):
                self._refuse(str(err), digest)
            return False
        if not self._unchanged(pair):
            return False  # rewritten while OpenSSL read it: the next poll loads the final version
        self._served, self._last_digest, self._waiting, self._logged = served, digest, None, None
        self.refusal = None
        log.info(
            "serving TLS certificate from %s (sha256 %s, expires %s)",
            self.cert_file,
            digest[:12],
            served.not_after.isoformat(),
        )
        return True

    def _unchanged(self, pair: KeyPair) -> bool:
        try:
            return self._read() == pair
        except OSError:
            return False

    def _load(self, pair: KeyPair, digest: str) -> Served:
        """Check ``pair`` and build a context from the files it was read from.

        OpenSSL only loads from files, so the files are read twice; :meth:`reload` compares
        them again afterwards, so the context holds exactly the bytes that were checked.
        """
        label = f"TLS pair {self.cert_file} + {self.key_file}"
        cert = check_pair(pair, self._clock(), label)
        try:
            context = _base_context(self._minimum_version, self.client_ca_file)
            context.load_cert_chain(self.cert_file, self.key_file)
        except OSError as err:  # ssl.SSLError is one; so is a client CA file that went away
            raise CertificateError(f"{label}: OpenSSL refused it: {err}") from None
        return Served(digest, cert, context)

    def _refuse(self, why: str, digest: str, final: bool = True) -> None:
        """Log why ``digest`` is not served (once); ``final``: do not look at these files again."""
        self.refusal = why if final else None
        if final:
            self._last_digest = digest
        if digest == self._logged:
            return  # already said so
        self._logged = digest
        keeping = (
            f"still serving the previous certificate (expires {self._served.not_after.isoformat()})"
            if self._served is not None
            else "no certificate is served yet"
        )
        log.error("refusing new TLS certificate: %s; %s", why, keeping)

    async def watch(self, interval: float = 1.0) -> None:
        """Poll the files every ``interval`` seconds until cancelled."""
        while True:
            self.reload()
            await asyncio.sleep(interval)
