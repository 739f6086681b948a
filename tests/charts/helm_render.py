"""Render the chart with real Helm (helm-sdkpy) by installing it into the kube-apiserver stand-in.

A module of its own, not ``conftest``: ``tests/certs`` has a ``conftest`` too, and with both
directories on the command line ``from conftest import ...`` got whichever was imported last.

Helm itself cannot be installed here, but the PyPI package ``helm-sdkpy`` ships the Helm v4
library. It has no client-only "template" action, so the tests install the chart into the
in-memory stand-in of ``apiserver_standin.py`` and read back what Helm created: the same rendering,
schema validation and ``required`` checks as ``helm install``. A stand-in and not the real API
server (``tests/kube``) on purpose: the chart tests must run on a machine without the Kubernetes
binaries, and an install into the real one would also run its admission (a namespace, quotas) and
keep the release's objects in a cluster other tests share.

helm-sdkpy declares Python >= 3.12 but works on 3.11, so it cannot be a dependency of the test
extra (pip would refuse it on 3.11); the first run installs it into the test virtualenv with
``--ignore-requires-python`` (:func:`_install_helm_sdkpy`), so that the README's test command stays
one command. Where it cannot be installed (no index, not a virtualenv) these tests skip, saying so.
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from apiserver_standin import Apiserver, running

CHART = str(Path(__file__).resolve().parents[2] / "charts" / "draguard")
NAMESPACE = "draguard-system"

# Helm reads its cache/config/data directories from the environment when the Go library loads,
# so they must point somewhere writable before the first call.
_HELM_HOME = tempfile.mkdtemp(prefix="draguard-helm-")
for _var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
    os.environ.setdefault(_var, os.path.join(_HELM_HOME, _var.lower()))

HELM_SDKPY = "helm-sdkpy==0.1.32"


def _install_helm_sdkpy() -> str:
    """Install :data:`HELM_SDKPY` into this virtualenv; the reason when it cannot be. The suite's
    xdist workers all import this module at once: one installs while the others wait on the lock,
    then find it installed (two pips writing one site-packages at once can break both)."""
    if sys.prefix == sys.base_prefix:  # never into a system or user-wide Python
        return f"helm-sdkpy is not installed: pip install --ignore-requires-python '{HELM_SDKPY}'"
    with open(Path(sys.prefix) / ".draguard-helm-sdkpy.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        if importlib.util.find_spec("helm_sdkpy") is not None:
            return ""
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--ignore-requires-python", HELM_SDKPY],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        return f"helm-sdkpy could not be installed: {(done.stderr or done.stdout).strip()[-300:]}"
    importlib.invalidate_caches()
    return ""


def _load_helm() -> tuple[Any, str]:
    """The ``helm_sdkpy`` module (installed first when missing) and ``""``, or why it cannot be used."""
    try:
        import helm_sdkpy
    except ImportError:  # pragma: no cover - depends on the environment
        reason = _install_helm_sdkpy()
        if reason:
            return None, reason
        import helm_sdkpy
    try:
        helm_sdkpy.get_version()
    except Exception as err:  # pragma: no cover - a wheel whose native library cannot load
        return None, f"helm-sdkpy is installed but its Helm library cannot load: {err}"
    return helm_sdkpy, ""


helm_sdkpy, HELM_MISSING = _load_helm()

# Under CI the chart tests run whatever happens and fail in require_helm() when Helm is missing.
UNDER_CI = os.environ.get("CI", "").lower() == "true"
needs_helm = pytest.mark.skipif(bool(HELM_MISSING) and not UNDER_CI, reason=HELM_MISSING or "helm available")


def require_helm() -> Any:
    """The helm_sdkpy module; a missing one fails the test (it runs without Helm only under CI)."""
    if helm_sdkpy is None:
        pytest.fail(HELM_MISSING, pytrace=False)
    return helm_sdkpy


def kubeconfig(apiserver: Apiserver) -> str:
    return f"""apiVersion: v1
kind: Config
clusters: [{{name: standin, cluster: {{server: "{apiserver.url}"}}}}]
contexts: [{{name: standin, context: {{cluster: standin, user: test, namespace: {NAMESPACE}}}}}]
current-context: standin
users: [{{name: test, user: {{token: test}}}}]
"""


class HelmError(Exception):
    """Helm refused the chart or the values (schema, ``required``, template errors)."""


def render(
    values: dict[str, Any] | None = None, chart: str = CHART, release: str = "draguard"
) -> list[dict[str, Any]]:
    """Every object ``helm install`` creates for ``values`` (as ``release``), Helm's own release
    Secret excluded."""
    require_helm()
    with running() as apiserver:
        apiserver.store.put(apiserver.resource("Namespace"), "", {"metadata": {"name": NAMESPACE}})
        config = helm_sdkpy.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig(apiserver))
        install = helm_sdkpy.Install(config)
        try:
            asyncio.run(install.run(release, chart, values=values or {}, wait=False, timeout=30))
        except helm_sdkpy.HelmError as err:
            raise HelmError(str(err)) from None
        return [
            obj
            for obj in (
                o for (_, _, _), o in sorted(apiserver.store.objects.items(), key=lambda kv: kv[0][1:])
            )
            if obj["kind"] != "Namespace" and not obj["metadata"]["name"].startswith("sh.helm.release.")
        ]


def deadline_args(objects: list[dict[str, Any]]) -> list[str]:
    """The ``--deadline=`` arguments the rendered Deployment starts ``draguard serve`` with."""
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [a for a in container["args"] if a.startswith("--deadline=")]


def uninstall_deletes(values: dict[str, Any] | None = None, chart: str = CHART) -> list[tuple[str, str]]:
    """``(resource, name)`` of every DELETE ``helm uninstall`` sends after installing ``values``, in
    order, Helm's release Secret excluded; asserts nothing the install created is left behind."""
    require_helm()
    with running() as apiserver:
        apiserver.store.put(apiserver.resource("Namespace"), "", {"metadata": {"name": NAMESPACE}})
        config = helm_sdkpy.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig(apiserver))
        asyncio.run(
            helm_sdkpy.Install(config).run("draguard", chart, values=values or {}, wait=False, timeout=30)
        )
        apiserver.requests.clear()
        asyncio.run(helm_sdkpy.Uninstall(config).run("draguard", wait=False, timeout=30))
        left = [(r.kind, name) for (r, _, name) in apiserver.store.objects if r.kind != "Namespace"]
        assert left == [], f"helm uninstall left {left}"
        paths = [path.split("?")[0] for method, path in apiserver.requests if method == "DELETE"]
        deletes = [(path.split("/")[-2], path.split("/")[-1]) for path in paths]
        return [(resource, name) for resource, name in deletes if not name.startswith("sh.helm.release.")]
