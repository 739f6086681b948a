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
