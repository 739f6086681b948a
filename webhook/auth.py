"""Who is calling the dry-run endpoint: bearer tokens checked by the API server, or client certificates.

The admission paths (``/validate``, ``/mutate``) are called by the API server only, so the port
needs no authentication of its own. The dry-run endpoint sits on the same port but answers anyone
who can reach it, and an answer lists the cluster's devices and costs real CPU; so it authenticates
its callers the two ways Kubernetes clients already can:

* **bearer tokens** (a service-account token, an OIDC token the cluster accepts...): sent to the
  API server as an ``authentication.k8s.io/v1`` TokenReview, the way the kubelet and aggregated API
  servers delegate authentication. Answers are cached briefly by token digest (upstream's webhook
  token authenticator caches too, ``--authentication-token-webhook-cache-ttl``), so a burst of
  requests costs one review;
* **client certificates** issued by a CA the admin configures: the user is the subject's common name
  and the groups its organizations, as kube-apiserver reads them (x509 request authenticator). The
  TLS handshake checks the chain and dates; this module checks again that the certificate was issued
  by *this* CA, since the serving context may trust other CAs for other purposes.

``--demo`` turns authentication off (every caller is ``system:anonymous``), for a laptop only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

ANONYMOUS = "system:anonymous"
# How long an answer of the API server is reused (seconds): a revoked token keeps working at most
# this long, and a wrong one is not re-sent on every retry of a misconfigured client.
ACCEPTED_TTL = 60.0
REFUSED_TTL = 10.0
CACHE_SIZE = 4096


class AuthError(Exception):
    """The caller cannot be let in: ``status`` 401 (who are you?) or 503 (cannot find out now)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Caller:
    """An authenticated caller; ``name`` keys the rate limit and the logs."""

    name: str
    groups: tuple[str, ...] = ()
    method: str = "demo"


class Authenticator(Protocol):
    async def authenticate(self, request: web.Request) -> Caller | None:
        """The caller, None when the request carries no credential of this kind; raises AuthError."""


# --- bearer tokens, through TokenReview -----------------------------------------------------------


@dataclass(frozen=True)
class Review:
    """What the API server said about a token: ``caller`` when authenticated, else ``error``."""

    caller: Caller | None
    error: str = ""


class ReviewUnavailable(Exception):
    """The TokenReview could not be made (API server unreachable, forbidden to us, timed out)."""


TokenReviewer = Callable[[str], Review]
"""Blocking: sends one TokenReview for a token; raises ReviewUnavailable."""


def kube_token_reviewer(
    api_client: object, audiences: Sequence[str] = (), timeout: tuple[float, float] = (1.0, 3.0)
) -> TokenReviewer:
    """A reviewer that creates TokenReviews through the ``kubernetes`` client's typed API.

    ``audiences``, when given, are asked for, and a token accepted for none of them is refused (the
    API server answers with the subset it accepted, upstream ``TokenReviewStatus.audiences``).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.AuthenticationV1Api(api_client)

    def review(token: str) -> Review:
        body = client.V1TokenReview(
            spec=client.V1TokenReviewSpec(token=token, audiences=list(audiences) or None)
        )
        try:
            answer = api.create_token_review(body, _request_timeout=timeout)
        except ApiException as err:
            raise ReviewUnavailable(f"TokenReview create answered HTTP {err.status}: {err.reason}") from None
        except Exception as err:  # urllib3 connection and timeout errors have no common base worth naming
            raise ReviewUnavailable(f"TokenReview create failed: {type(err).__name__}: {err}") from None
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return Review(None, (status.error if status is not None else "") or "token not authenticated")
        if audiences and not set(status.audiences or ()) & set(audiences):
            return Review(None, f"token is not valid for the audiences {', '.join(audiences)}")
        user = status.user
        return Review(Caller(user.username or "", tuple(user.groups or ()), "token"))

    return review


class BearerTokens:
    """Authenticates ``Authorization: Bearer <token>`` with TokenReview, caching answers."""

    def __init__(self, reviewer: TokenReviewer, clock: Callable[[], float] = time.monotonic) -> None:
        self._reviewer = reviewer
        self._clock = clock
        # token digest -> (expiry, review); never the token itself
        self._cache: OrderedDict[str, tuple[float, Review]] = OrderedDict()

    async def authenticate(self, request: web.Request) -> Caller | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            return None
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(401, "Authorization header: expected 'Bearer <token>'")
        review = await self._review(token)
        if review.caller is None:
            raise AuthError(401, f"bearer token refused: {review.error}")
        return review.caller

    async def _review(self, token: str) -> Review:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            review = await asyncio.to_thread(self._reviewer, token)
        except ReviewUnavailable as err:
            raise AuthError(503, f"cannot authenticate the bearer token now: {err}") from None
        ttl = ACCEPTED_TTL if review.caller is not None else REFUSED_TTL
        self._cache[key] = (self._clock() + ttl, review)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return review


# --- client certificates --------------------------------------------------------------------------


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def caller_of(cert: x509.Certificate) -> Caller:
    """User = subject CN, groups = subject O values, as kube-apiserver maps client certificates."""
    subject = cert.subject
    names = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    groups = tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return Caller(names[0] if names else "", groups, "certificate")


class ClientCertificates:
    """Authenticates the TLS client certificate against the configured CA bundle."""

    def __init__(self, ca_pem: bytes, clock: Callable[[], dt.datetime] = _utcnow) -> None:
        self._cas = x509.load_pem_x509_certificates(ca_pem)
        self._clock = clock

    @classmethod
    def from_file(cls, path: str) -> ClientCertificates:
        with open(path, "rb") as f:
            return cls(f.read())

    async def authenticate(self, request: web.Request) -> Caller | None:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        der = ssl_object.getpeercert(binary_form=True) if isinstance(ssl_object, ssl.SSLObject) else None
        if not der:
            return None
        return self.check(x509.load_der_x509_certificate(der))

    def check(self, cert: x509.Certificate) -> Caller:
        """The caller a certificate names, if one of our CAs issued it and it is valid now."""
        now = self._clock()
        if not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
            raise AuthError(
                401, f"client certificate is not valid now (valid until {cert.not_valid_after_utc})"
            )
        if not any(self._issued_by(cert, ca) for ca in self._cas):
            raise AuthError(
                401, f"client certificate {cert.subject.rfc4514_string()} is not issued by the dry-run CA"
            )
        caller = caller_of(cert)
        if not caller.name:
            raise AuthError(401, "client certificate has no subject common name (the user name)")
        return caller

    @staticmethod
    def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True


# --- the chain ------------------------------------------------------------------------------------


class Open:
    """``--demo``: no authentication; every caller is anonymous (rate-limited by address)."""

    async def authenticate(self, request: web.Request) -> Caller | None:
        return Caller(f"{ANONYMOUS}@{request.remote or 'unknown'}", (), "demo")


class Chain:
    """The first authenticator that recognises a credential decides; no credential at all is 401."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self._authenticators = tuple(authenticators)

    async def authenticate(self, request: web.Request) -> Caller:
        for authenticator in self._authenticators:
            caller = await authenticator.authenticate(request)
            if caller is not None:
                return caller
        raise AuthError(401, self._missing())

    def _missing(self) -> str:
        ways = []
        if any(isinstance(a, BearerTokens) for a in self._authenticators):
            ways.append("a bearer token (Authorization: Bearer <token>)")
        if any(isinstance(a, ClientCertificates) for a in self._authenticators):
            ways.append("a client certificate issued by the dry-run CA")
        if not ways:
            return (
                "no authentication method is configured: serve a cluster (for TokenReview) "
                "or give --dryrun-client-ca"
            )
        return "authentication required: send " + " or ".join(ways)


# --- rate limit -----------------------------------------------------------------------------------


class RateLimiter:
    """A token bucket per caller: ``rate`` requests per second on average, bursts of ``burst``."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic, max_callers: int = 10_000
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._max_callers = max_callers
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # caller -> (tokens, at)

    def take(self, caller: str) -> float:
        """0 when the request may go ahead (one token taken), else the seconds until it may."""
        now = self._clock()
        tokens, at = self._buckets.get(caller, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            tokens -= 1.0
            wait = 0.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[caller] = (tokens, now)
        self._buckets.move_to_end(caller)
        while len(self._buckets) > self._max_callers:
            self._buckets.popitem(last=False)  # the least recently seen caller starts afresh
        return wait
