"""The ``certificates`` section of draguard's config file, and wiring it to the controller.

The chart renders this section into the config ConfigMap; ``draguard serve`` reads it and, in
``selfManaged`` mode, starts :func:`start_rotation`. In ``certManager`` and ``secret`` modes
something else writes the serving Secret and the caBundle, and serve only reloads the files.

Durations use the Go spelling Kubernetes users know (``8760h``, ``90m``, ``30s``, combined as
``1h30m``). Errors name the field as ``certificates.<field>`` and say what is accepted.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certs.controller import CertController, Targets, run
from certs.kube import Kube
from certs.leader import LeaseConfig, LeaseElector
from certs.material import KeyAlgorithm, service_hosts
from certs.rotation import RotationPolicy
from policies.config import CertificatesConfig

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

MODES = ("selfManaged", "certManager", "secret")
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class SettingsError(ValueError):
    """A config value that cannot be used; the message names the field and the fix."""


def parse_duration(text: Any, field: str) -> dt.timedelta:
    match = DURATION.match(str(text)) if text not in (None, "") else None
    if match is None or not any(match.groups()):
        raise SettingsError(f"{field}: {text!r} is not a duration; write e.g. 8760h, 90m, 1h30m or 30s")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)


@dataclass(frozen=True)
class CertSettings:
    mode: str
    targets: Targets
    policy: RotationPolicy
    lease_name: str

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> CertSettings:
        # The keys are policies.config's, so that every command checks the same file the same way.
        known = {f.alias or n for n, f in CertificatesConfig.model_fields.items()}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SettingsError(
                f"certificates: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        mode = raw.get("mode", "selfManaged")
        if mode not in MODES:
            raise SettingsError(f"certificates.mode: {mode!r} is not one of {', '.join(MODES)}")
        for field in ("service", "namespace"):
            if not raw.get(field):
                raise SettingsError(f"certificates.{field}: required (the webhook Service's {field})")
        algorithm = raw.get("keyAlgorithm", KeyAlgorithm.ECDSA_P256.value)
        if algorithm not in {a.value for a in KeyAlgorithm}:
            choices = ", ".join(a.value for a in KeyAlgorithm)
            raise SettingsError(f"certificates.keyAlgorithm: {algorithm!r} is not one of {choices}")
        validating, mutating = (
            raw.get("validatingWebhookConfiguration"),
            raw.get("mutatingWebhookConfiguration"),
        )
        targets = Targets(
            namespace=raw["namespace"],
            validating=(validating,) if validating else (),
            mutating=(mutating,) if mutating else (),
            ca_secret=raw.get("caSecretName", "draguard-ca"),
            tls_secret=raw.get("tlsSecretName", "draguard-tls"),
        )
        renew_before = raw.get("renewBefore")
        try:
            policy = RotationPolicy(
                hosts=tuple(service_hosts(raw["service"], raw["namespace"], raw.get("extraHosts") or [])),
                ca_validity=parse_duration(raw.get("caValidity", "8760h"), "certificates.caValidity"),
                serving_validity=parse_duration(
                    raw.get("servingValidity", "2160h"), "certificates.servingValidity"
                ),
                renew_fraction=float(raw.get("renewFraction", 2 / 3)),
                renew_before=parse_duration(renew_before, "certificates.renewBefore")
                if renew_before
                else None,
                overlap=parse_duration(raw.get("overlap", "1h"), "certificates.overlap"),
                algorithm=KeyAlgorithm(algorithm),
            )
        except (TypeError, ValueError) as err:
            if isinstance(err, SettingsError):
                raise
            raise SettingsError(f"certificates: {err}") from None
        return cls(mode, targets, policy, raw.get("leaseName", "draguard-certs"))


def start_rotation(
    settings: CertSettings, api: ApiClient, identity: str
) -> tuple[threading.Thread, threading.Event]:
    """Run leader election and rotation in a daemon thread; set the returned event to stop it.

    ``identity`` is the pod name (downward API ``POD_NAME``). Only ``selfManaged`` mode rotates.
    """
    if settings.mode != "selfManaged":
        raise SettingsError(
            f"certificates.mode is {settings.mode}: draguard does not rotate certificates itself"
        )
    kube = Kube(api)
    lease = LeaseConfig(settings.targets.namespace, settings.lease_name, identity)
    elector = LeaseElector(kube, lease)
    controller = CertController(kube, settings.targets, settings.policy)
    stop = threading.Event()
    thread = threading.Thread(
        target=run, args=(elector, controller, stop, lease.retry_period), name="draguard-certs", daemon=True
    )
    thread.start()
    return thread, stop
