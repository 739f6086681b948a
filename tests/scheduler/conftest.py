"""The fixtures of the tests that run kube-scheduler itself (see ``realscheduler.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane
from realscheduler import Scene


@pytest.fixture(scope="session")
def plane(control_plane: ControlPlane) -> ControlPlane:
    """The session's control plane with kube-scheduler, and the controller-manager for claims from
    templates."""
    control_plane.start_scheduler()
    control_plane.start_controller_manager()
    return control_plane


@pytest.fixture
def scene(plane: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[Scene]:
    built = Scene(plane, kube_namespace, tmp_path)
    yield built
    built.close()


@pytest.fixture(scope="session")
def allocatable_plane(node_allocatable_plane: ControlPlane) -> ControlPlane:
    """The session's control plane with KEP-5517's alpha gate (tests/conftest.py; the quota and
    sharing end-to-end tests run on it too), with its kube-scheduler, which gets the gate as well,
    and the controller-manager (claims from templates, quota usage)."""
    node_allocatable_plane.start_scheduler()
    node_allocatable_plane.start_controller_manager()
    return node_allocatable_plane


@pytest.fixture
def allocatable_scene(allocatable_plane: ControlPlane, tmp_path: Path) -> Iterator[Scene]:
    """A scene on that control plane, in a namespace of its own."""
    with allocatable_plane.namespace() as namespace:
        built = Scene(allocatable_plane, namespace, tmp_path)
        yield built
        built.close()
