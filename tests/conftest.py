"""Fixtures shared by the whole test tree: the real control plane (see ``kube/controlplane.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "kube"))

from controlplane import ASSETS_VAR, DEVICE_TAINT_RULES, ControlPlane, cannot_run, missing_binaries


def _running(feature_gates: dict[str, bool], **options: Any) -> Iterator[ControlPlane]:
    """A control plane for the fixture's scope (most: the rest of the test session). Without the
    binaries the tests that use it skip with one line saying how to provide them; under CI
    (``CI=true``) that is a failure, since CI is where they must run."""
    missing = missing_binaries()
    if missing:
        cannot_run(missing)
    plane = ControlPlane(Path(os.environ[ASSETS_VAR]), feature_gates=feature_gates, **options)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd and kube-apiserver 1.36 with its default feature gates, as a cluster admin's would be
    (agreement with the API server is checked against this one), started once per test session."""
    yield from _running({})


@pytest.fixture(scope="session")
def node_allocatable_plane() -> Iterator[ControlPlane]:
    """A second control plane with KEP-5517's DRANodeAllocatableResources gate (alpha in 1.36, off
    by default): devices that hand out node resources (a CPU driver's cores) keep their
    ``nodeAllocatableResourceMappings`` only with it, and the quota and sharing rules read them.
    Started only when a test asks for it, once per session."""
    yield from _running({"DRANodeAllocatableResources": True})


@pytest.fixture(scope="module")
def kubeadm_plane() -> Iterator[ControlPlane]:
    """A control plane whose kube-apiserver runs as kubeadm starts it (privileged containers
    allowed), with DeviceTaintRule served (the DRADeviceTaintRules gate and its --runtime-config
    entry): the cluster the demo folders are applied to. Started only when a test asks for it, and
    stopped after its module: on 2 cores an idle API server and etcd slow the rest of the suite."""
    yield from _running(
        {"DRADeviceTaintRules": True}, runtime_config=[DEVICE_TAINT_RULES], allow_privileged=True
    )


@pytest.fixture
def kube_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test (see :meth:`ControlPlane.namespace`)."""
    with control_plane.namespace() as name:
        yield name
