"""Fixtures shared by the whole test tree: the real control plane (see ``kube/controlplane.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "kube"))

from controlplane import ASSETS_VAR, ControlPlane, missing_binaries


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd and kube-apiserver 1.36, started once per test session and stopped at its end.

    Without the binaries the tests that use it skip with one line saying how to provide them;
    under CI (``CI=true``) that is a failure, since CI is where they must run.
    """
    missing = missing_binaries()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    # KEP-5517 (alpha in 1.36, off by default): devices that hand out node resources (a CPU driver's
    # cores) keep their nodeAllocatableResourceMappings only with it; the quota and sharing rules
    # read them.
    plane = ControlPlane(Path(os.environ[ASSETS_VAR]), feature_gates={"DRANodeAllocatableResources": True})
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def kube_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test (see :meth:`ControlPlane.namespace`)."""
    with control_plane.namespace() as name:
        yield name
