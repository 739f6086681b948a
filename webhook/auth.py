"""Who is calling the dry-run endpoint (bearer tokens or client certificates), and may they?

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

Knowing who calls is not enough: any pod's service-account token authenticates. So a caller must
also be **authorized**, by the API server, through an ``authorization.k8s.io/v1``
SubjectAccessReview for the request's non-resource URL (``nonResourceAttributes: {path:
/v1/dryrun, verb: post}``; the verb of a non-resource request is its lower-cased HTTP method,
``staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``), the way kube-rbac-proxy and
the kubelet delegate authorization. RBAC grants it with ``nonResourceURLs: ["/v1/dryrun"], verbs:
["post"]`` (the chart ships that ClusterRole). Answers are cached for ten seconds, allowed or not,
as upstream's delegating authorizer does (``DelegatingAuthorizationOptions`` ``AllowCacheTTL``/
``DenyCacheTTL``, ``staging/src/k8s.io/apiserver/pkg/server/options/authorization.go``). Without an
API server (``--state`` with ``--dryrun-client-ca``) nothing can be asked, and a certificate of the
dry-run CA is the authorization.

``--demo`` turns authentication off (every caller is ``system:anonymous``), for a laptop only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

ANONYMOUS = "system:anonymous"
# How long an answer of the API server is reused (seconds): a revoked token keeps working at most
# this long, and a wrong one is not re-sent on every retry of a misconfigured client.
ACCEPTED_TTL = 60.0
REFUSED_TTL = 10.0
# Authorization answers, as long as upstream's delegating authorizer keeps them (see the docstring).
ALLOWED_TTL = 10.0
DENIED_TTL = 10.0
CACHE_SIZE = 4096

V = TypeVar("V")


class AuthError(Exception):
    """The caller cannot be let in: ``status`` 401 (who are you?) or 503 (cannot find out now)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Extra = tuple[tuple[str, tuple[str, ...]], ...]
"""``user.extra`` of a TokenReview (e.g. the pod a service-account token was bound to), sorted."""


@dataclass(frozen=True)
class Caller:
    """An authenticated caller; ``name`` keys the rate limit and the logs. ``uid`` and ``extra`` are
    what the API server told about a token, passed on to the SubjectAccessReview as they came."""

    name: str
    groups: tuple[str, ...] = ()
    method: str = "demo"
    uid: str = ""
    extra: Extra = ()


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
    """A review could not be made (API server unreachable, forbidden to us, timed out)."""


R = TypeVar("R")


def _created(kind: str, create: Callable[[], R]) -> R:
    """The API server's answer to creating a review object; raises ReviewUnavailable."""
    from kubernetes.client.exceptions import ApiException

    try:
        return create()
    except ApiException as err:
        raise ReviewUnavailable(f"{kind} create answered HTTP {err.status}: {err.reason}") from None
    except Exception as err:  # urllib3 connection and timeout errors have no common base worth naming
        raise ReviewUnavailable(f"{kind} create failed: {type(err).__name__}: {err}") from None


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

    api = client.AuthenticationV1Api(api_client)

    def review(token: str) -> Review:
        body = client.V1TokenReview(
            spec=client.V1TokenReviewSpec(token=token, audiences=list(audiences) or None)
        )
        answer = _created("TokenReview", lambda: api.create_token_review(body, _request_timeout=timeout))
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return Review(None, (status.error if status is not None else "") or "token not authenticated")
        if audiences and not set(status.audiences or ()) & set(audiences):
            return Review(None, f"token is not valid for the audiences {', '.join(audiences)}")
        user = status.user
        extra = tuple(sorted((key, tuple(values or ())) for key, values in (user.extra or {}).items()))
        return Review(Caller(user.username or "", tuple(user.groups or ()), "token", user.uid or "", extra))

    return review


class TtlCache(Generic[V]):
    """Answers of the API server by key digest, each kept for its own time, the oldest dropped
    beyond ``size``: a burst of requests from one caller costs one review."""

    def __init__(self, clock: Callable[[], float], size: int = CACHE_SIZE) -> None:
        self._clock = clock
        self._size = size
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def get(self, key: str) -> V | None:
        found = self._entries.get(key)
        return found[1] if found is not None and found[0] > self._clock() else None

    def put(self, key: str, value: V, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def keys(self) -> list[str]:
        return list(self._entries)


def digest(*parts: object) -> str:
    """A cache key that does not keep what it is made of (a token must not stay in memory)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class BearerTokens:
    """Authenticates ``Authorization: Bearer <token>`` with TokenReview, caching answers."""

    def __init__(self, reviewer: TokenReviewer, clock: Callable[[], float] = time.monotonic) -> None:
        self._reviewer = reviewer
        self._cache: TtlCache[Review] = TtlCache(clock)

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
        key = digest(token)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            review = await asyncio.to_thread(self._reviewer, token)
        except ReviewUnavailable as err:
            raise AuthError(503, f"cannot authenticate the bearer token now: {err}") from None
        self._cache.put(key, review, ACCEPTED_TTL if review.caller is not None else REFUSED_TTL)
        return review


# --- authorization, through SubjectAccessReview ---------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What the API server's authorizers said; ``reason`` explains a refusal when they gave one."""

    allowed: bool
    reason: str = ""


AccessReviewer = Callable[[Caller, str, str], Decision]
"""Blocking: one SubjectAccessReview of (caller, non-resource path, verb); raises ReviewUnavailable."""


def kube_access_reviewer(api_client: object, timeout: tuple[float, float] = (1.0, 3.0)) -> AccessReviewer:
    """A reviewer that creates SubjectAccessReviews through the ``kubernetes`` client's typed API."""
    from kubernetes import client

    api = client.AuthorizationV1Api(api_client)

    def review(caller: Caller, path: str, verb: str) -> Decision:
        spec = client.V1SubjectAccessReviewSpec(
            user=caller.name,
            groups=list(caller.groups) or None,
            uid=caller.uid or None,
            extra={key: list(values) for key, values in caller.extra} or None,
            non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=verb),
        )
        body = client.V1SubjectAccessReview(spec=spec)
        answer = _created(
            "SubjectAccessReview", lambda: api.create_subject_access_review(body, _request_timeout=timeout)
        )
        status = answer.status
        if status is None:
            return Decision(False, "the API server sent no status")
        allowed = bool(status.allowed) and not status.denied
        return Decision(allowed, status.reason or status.evaluation_error or "")

    return review


class SubjectAccessReviews:
    """Authorizes a caller for the request's path and method with SubjectAccessReview, caching answers."""

    def __init__(self, reviewer: AccessReviewer, clock: Callable[[], float] = time.monotonic) -> None:
        self._reviewer = reviewer
        self._cache: TtlCache[Decision] = TtlCache(clock)

    async def authorize(self, caller: Caller, path: str, verb: str) -> None:
        """Return when the API server allows ``caller`` to ``verb`` ``path``; raises AuthError (403,
        or 503 when it cannot be asked now)."""
        key = digest(caller.name, caller.groups, caller.uid, caller.extra, path, verb)
        decision = self._cache.get(key)
        if decision is None:
            try:
                decision = await asyncio.to_thread(self._reviewer, caller, path, verb)
            except ReviewUnavailable as err:
                raise AuthError(503, f"cannot authorize {caller.name} now: {err}") from None
            self._cache.put(key, decision, ALLOWED_TTL if decision.allowed else DENIED_TTL)
        if not decision.allowed:
            # The API server's own wording for a refused non-resource request (responsewriters/errors.go).
            message = f"User {json.dumps(caller.name)} cannot {verb} path {json.dumps(path)}"
            raise AuthError(403, f"{message}: {decision.reason}" if decision.reason else message)


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
    """The first authenticator that recognises a credential decides; no credential at all is 401.
    With an ``authorizer`` (an API server to ask), the caller must then be allowed the request."""

    def __init__(
        self, authenticators: Sequence[Authenticator], authorizer: SubjectAccessReviews | None = None
    ) -> None:
        self._authenticators = tuple(authenticators)
        self._authorizer = authorizer

    async def authenticate(self, request: web.Request) -> Caller:
        """The caller, authenticated and, with an authorizer, allowed; raises AuthError."""
        caller = await self._identify(request)
        if self._authorizer is not None:
            await self._authorizer.authorize(caller, request.path, request.method.lower())
        return caller

    async def _identify(self, request: web.Request) -> Caller:
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
