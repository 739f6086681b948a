"""Fixtures: the real API server of the session (``tests/kube``), a fresh namespace, and the client
the certificate code uses, recording what it asks.

These tests once ran against an in-memory stand-in; the real server now enforces what the code
relies on (resourceVersion preconditions, the refusal of unconditional Lease updates, MicroTime,
base64 ``[]byte`` fields) and adds what the stand-in did not (defaulting, pruning, validation).
Without the binaries they skip, saying how to provide them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from controlplane import ControlPlane
from kube_recording import RecordingKube
from kubernetes import client


@pytest.fixture
def api_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.client() as api:
        yield api


@pytest.fixture
def kube(api_client: client.ApiClient) -> RecordingKube:
    return RecordingKube(api_client)
