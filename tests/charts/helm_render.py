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

helm-sdkpy declares Python >= 3.12 but works on 3.11; it is installed with
``pip install --ignore-requires-python helm-sdkpy``. Without it these tests skip, saying so.
"""

from __future__ import annotations

import asyncio
import os
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

try:
    import helm_sdkpy
except ImportError:  # pragma: no cover - depends on the environment
    helm_sdkpy = None
    HELM_MISSING = "helm-sdkpy is not installed: pip install --ignore-requires-python helm-sdkpy"
else:
    try:
        helm_sdkpy.get_version()
        HELM_MISSING = ""
    except Exception as err:  # pragma: no cover - a wheel whose native library cannot load
        HELM_MISSING = f"helm-sdkpy is installed but its Helm library cannot load: {err}"

needs_helm = pytest.mark.skipif(bool(HELM_MISSING), reason=HELM_MISSING or "helm available")


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


def render(values: dict[str, Any] | None = None, chart: str = CHART) -> list[dict[str, Any]]:
    """Every object ``helm install`` creates for ``values``, Helm's own release Secret excluded."""
    assert helm_sdkpy is not None
    with running() as apiserver:
        apiserver.store.put(apiserver.resource("Namespace"), "", {"metadata": {"name": NAMESPACE}})
        config = helm_sdkpy.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig(apiserver))
        install = helm_sdkpy.Install(config)
        try:
            asyncio.run(install.run("draguard", chart, values=values or {}, wait=False, timeout=30))
        except helm_sdkpy.HelmError as err:
            raise HelmError(str(err)) from None
        return [
            obj
            for obj in (
                o for (_, _, _), o in sorted(apiserver.store.objects.items(), key=lambda kv: kv[0][1:])
            )
            if obj["kind"] != "Namespace" and not obj["metadata"]["name"].startswith("sh.helm.release.")
        ]


def uninstall_deletes(values: dict[str, Any] | None = None, chart: str = CHART) -> list[tuple[str, str]]:
    """``(resource, name)`` of every DELETE ``helm uninstall`` sends after installing ``values``, in
    order, Helm's release Secret excluded; asserts nothing the install created is left behind."""
    assert helm_sdkpy is not None
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
