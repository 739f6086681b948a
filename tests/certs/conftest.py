"""Fixtures: the kube-apiserver stand-in and real ``kubernetes`` clients pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apiserver_standin import Apiserver, running
from kubernetes import client


@pytest.fixture
def apiserver() -> Iterator[Apiserver]:
    with running() as server:
        yield server


@pytest.fixture
def api_client(apiserver: Apiserver) -> Iterator[client.ApiClient]:
    configuration = client.Configuration(host=apiserver.url)
    with client.ApiClient(configuration) as api:
        yield api
