"""Self-managed certificates: keep the CA and serving Secrets fresh and the caBundles in step.

One :meth:`CertController.reconcile` reads the two Secrets and draguard's webhook configurations,
lets :mod:`certs.rotation` decide, and writes back in the one order that keeps the API server
trusting what it is shown:

1. the CA Secret (``draguard-ca``: signing CA with key, announced successor, retired CAs);
2. the caBundle of every webhook in our Validating/MutatingWebhookConfigurations;
3. the serving Secret (``draguard-tls``: ``tls.crt``, ``tls.key``, ``ca.crt``), which every replica
   mounts and reloads through :mod:`certs.reloader`.

A serving certificate from a new CA is only written after step 2 succeeded in the same round.
Every write is conditional on the ``resourceVersion`` that was read (409 Conflict aborts the
round; the next round starts from fresh reads), so a leader that lost its Lease mid-round cannot
overwrite its successor's work. The CA private key lives only in the CA Secret, which no pod
mounts: only the leader reads it through the API.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization

from certs.kube import Kube, KubeApiError, cluster, namespaced
from certs.leader import LeaseElector
from certs.material import KeyPair, make_bundle, parse_bundle
from certs.rotation import CaState, RotationPolicy, bootstrap_ca, next_check, plan_ca, plan_serving

log = logging.getLogger(__name__)

ANNOTATION_NEXT_SINCE = "draguard.io/next-ca-since"
ANNOTATION_RETIRING_SINCE = "draguard.io/retiring-ca-since"
# The annotations this controller owns: a write sets or removes them; all others are left alone.
OWN_ANNOTATIONS = frozenset({ANNOTATION_NEXT_SINCE, ANNOTATION_RETIRING_SINCE})


class Conflict(Exception):
    """Someone else changed an object between our read and our write; retry from fresh reads."""


@dataclass(frozen=True)
class Targets:
    """Which objects the controller owns. Names match the chart's defaults."""

    namespace: str
    validating: tuple[str, ...] = ()
    mutating: tuple[str, ...] = ()
    ca_secret: str = "draguard-ca"
    tls_secret: str = "draguard-tls"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(data: Mapping[str, str], key: str) -> bytes:
    return base64.b64decode(data.get(key) or "")


def _parse_time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def _format_time(moment: dt.datetime | None) -> str | None:
    return moment.astimezone(dt.UTC).isoformat() if moment else None


def encode_ca_state(state: CaState) -> tuple[dict[str, str], dict[str, str]]:
    """Secret ``data`` and ``metadata.annotations`` for ``state``."""
    data = {
        "ca.crt": _b64(state.signing.cert_pem),
        "ca.key": _b64(state.signing.key_pem),
        "ca-bundle.crt": _b64(state.bundle),
    }
    if state.next is not None:
        data["next-ca.crt"], data["next-ca.key"] = _b64(state.next.cert_pem), _b64(state.next.key_pem)
    if state.retiring:
        data["retiring-ca.crt"] = _b64(make_bundle(state.retiring))
    annotations = {
        ANNOTATION_NEXT_SINCE: _format_time(state.next_since),
        ANNOTATION_RETIRING_SINCE: _format_time(state.retiring_since),
    }
    return data, {k: v for k, v in annotations.items() if v}


def decode_ca_state(data: Mapping[str, str], annotations: Mapping[str, str]) -> CaState:
    next_pair = None
    if data.get("next-ca.crt"):
        next_pair = KeyPair(_unb64(data, "next-ca.crt"), _unb64(data, "next-ca.key"))
    return CaState(
        signing=KeyPair(_unb64(data, "ca.crt"), _unb64(data, "ca.key")),
        next=next_pair,
        next_since=_parse_time(annotations.get(ANNOTATION_NEXT_SINCE)),
        retiring=tuple(parse_bundle(_unb64(data, "retiring-ca.crt"))),
        retiring_since=_parse_time(annotations.get(ANNOTATION_RETIRING_SINCE)),
    )


def _certs_of(bundle_pem: bytes) -> frozenset[bytes]:
    return frozenset(c.public_bytes(serialization.Encoding.DER) for c in parse_bundle(bundle_pem))


class CertController:
    """Reconciles certificates and caBundles; call :meth:`reconcile` only while holding the Lease."""

    def __init__(self, kube: Kube, targets: Targets, policy: RotationPolicy) -> None:
        self._kube = kube
        self._targets = targets
        self._policy = policy

    def reconcile(self, now: dt.datetime) -> dt.datetime:
        """One round at ``now``; returns when the next round has something to do at the latest.

        Raises :class:`Conflict` when a conditional write lost a race.
        """
        secret = self._read_secret(self._targets.ca_secret)
        if secret is None:
            state = bootstrap_ca(now, self._policy)
            secret = self._write_ca(None, state, "no CA yet: created one")
        else:
            state = decode_ca_state(secret.get("data") or {}, secret["metadata"].get("annotations") or {})
        configs = list(self._webhook_configs())
        published = all(self._carries(config, state.bundle) for _, config in configs)
        step = plan_ca(state, now, self._policy, published)
        if step.reason is not None:
            self._write_ca(secret, step.state, step.reason)
            state = step.state
        for path, config in configs:
            self._inject(path, config, state.bundle)
        pair = self._reconcile_serving(state, now)
        return next_check(state, pair, self._policy)

    # -- serving Secret -------------------------------------------------------------------------

    def _reconcile_serving(self, state: CaState, now: dt.datetime) -> KeyPair:
        secret = self._read_secret(self._targets.tls_secret)
        data = (secret or {}).get("data") or {}
        current = KeyPair(_unb64(data, "tls.crt"), _unb64(data, "tls.key")) if data.get("tls.crt") else None
        step = plan_serving(current, state, now, self._policy)
        if step.reason is None and _unb64(data, "ca.crt") == state.bundle:
            return step.pair
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": self._targets.tls_secret, "namespace": self._targets.namespace},
            "data": {
                "tls.crt": _b64(step.pair.cert_pem),
                "tls.key": _b64(step.pair.key_pem),
                "ca.crt": _b64(state.bundle),
            },
        }
        self._write_secret(secret, body)
        log.info(
            "serving certificate Secret %s updated: %s", self._targets.tls_secret, step.reason or "CA bundle"
        )
        return step.pair

    # -- CA Secret ------------------------------------------------------------------------------

    def _write_ca(self, secret: dict[str, Any] | None, state: CaState, reason: str) -> dict[str, Any]:
        data, annotations = encode_ca_state(state)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": self._targets.ca_secret,
                "namespace": self._targets.namespace,
                "annotations": annotations,
            },
            "data": data,
        }
        written = self._write_secret(secret, body)
        log.info("CA Secret %s updated: %s", self._targets.ca_secret, reason)
        return written

    # -- Secrets, conditional writes ------------------------------------------------------------

    def _read_secret(self, name: str) -> dict[str, Any] | None:
        return self._kube.get(namespaced("v1", self._targets.namespace, "secrets", name))

    def _write_secret(self, current: dict[str, Any] | None, body: dict[str, Any]) -> dict[str, Any]:
        """Create ``body``, or replace ``current`` keeping its metadata and resourceVersion.

        Annotations are merged, not replaced: others' stay (a backup tool, a Secret reflector, an
        admin's notes), and ours (:data:`OWN_ANNOTATIONS`) are exactly what ``body`` says, so one
        ``body`` no longer carries is removed.
        """
        namespace, name = self._targets.namespace, body["metadata"]["name"]
        try:
            if current is None:
                return self._kube.create(namespaced("v1", namespace, "secrets"), body)
            metadata = {**current["metadata"], **body["metadata"]}
            annotations = {
                key: value
                for key, value in (current["metadata"].get("annotations") or {}).items()
                if key not in OWN_ANNOTATIONS
            }
            annotations.update(body["metadata"].get("annotations") or {})
            metadata.pop("annotations", None)
            if annotations:
                metadata["annotations"] = annotations
            merged = {**body, "metadata": metadata}
            return self._kube.replace(namespaced("v1", namespace, "secrets", name), merged)
        except KubeApiError as err:
            if err.status == 409:
                raise Conflict(f"Secret {namespace}/{name} changed while we rotated it") from None
            raise

    # -- webhook configurations -----------------------------------------------------------------

    def _webhook_configs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, object)`` of each of our webhook configurations that exists."""
        for plural, names in (
            ("validatingwebhookconfigurations", self._targets.validating),
            ("mutatingwebhookconfigurations", self._targets.mutating),
        ):
            for name in names:
                path = cluster("admissionregistration.k8s.io/v1", plural, name)
                config = self._kube.get(path)
                if config is None:
                    log.warning("%s %s not found; nothing to inject", plural, name)
                    continue
                yield path, config

    @staticmethod
    def _carries(config: Mapping[str, Any], bundle: bytes) -> bool:
        wanted = _certs_of(bundle)
        return all(
            _certs_of(base64.b64decode((w.get("clientConfig") or {}).get("caBundle") or "")) == wanted
            for w in config.get("webhooks") or []
        )

    def _inject(self, path: str, config: dict[str, Any], bundle: bytes) -> None:
        """Set ``caBundle`` on every webhook of ``config`` that does not carry ``bundle`` yet.

        The whole object goes back as it was read (unknown fields included) with only the
        caBundles changed, conditional on its resourceVersion.
        """
        if self._carries(config, bundle):
            return
        webhooks = [
            {**w, "clientConfig": {**(w.get("clientConfig") or {}), "caBundle": _b64(bundle)}}
            for w in config.get("webhooks") or []
        ]
        try:
            self._kube.replace(path, {**config, "webhooks": webhooks})
        except KubeApiError as err:
            if err.status == 409:
                raise Conflict(f"{path} changed while we injected caBundle") from None
            raise
        log.info("caBundle injected into %s", path)


def run(
    elector: LeaseElector,
    controller: CertController,
    stop: threading.Event,
    retry_period: dt.timedelta,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    recheck: dt.timedelta = dt.timedelta(minutes=1),
) -> None:
    """Elect and reconcile until ``stop`` is set, then release the Lease.

    Runs in a thread of its own (the ``kubernetes`` client is synchronous): the aiohttp server
    starts it with ``asyncio.to_thread`` or a ``threading.Thread``. A leader reconciles when the
    plan says something is due and at least every ``recheck`` (a Secret or a caBundle may have
    been edited by hand, or the webhook configurations recreated without one: a minute of a few
    GETs is cheap next to a webhook the API server cannot call). Errors are logged and retried on
    the next round, never fatal: a replica that cannot rotate can still serve what it has.
    """
    due, leading = clock(), False
    while not stop.is_set():
        now = clock()
        try:
            was_leading, leading = leading, elector.try_acquire_or_renew(now)
            # A fresh leader reconciles at once: the previous one may have left work half done.
            if leading and (not was_leading or now >= due):
                due = min(controller.reconcile(now), now + recheck)
        except Conflict as err:
            log.info("certificate rotation lost a race, retrying: %s", err)
        except KubeApiError as err:
            log.error(
                "certificate rotation failed (HTTP %s %s), retrying: %s", err.status, err.reason, err.body
            )
        except Exception:  # a bug of ours: said with its traceback, and retried, as the docstring promises
            log.exception("certificate rotation failed, retrying")
        stop.wait(retry_period.total_seconds())
    try:
        elector.release(clock())
    except KubeApiError as err:
        log.warning("could not release the certificate lease: HTTP %s %s", err.status, err.reason)
