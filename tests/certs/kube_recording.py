"""The certificate code's client, recording what it asks (a module of its own, not ``conftest``:
with several ``conftest`` modules in the tree, ``from conftest import`` gets whichever was imported
last)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from certs.kube import Kube

Hook = Callable[[str, str, dict[str, Any] | None], None]


class RecordingKube(Kube):
    """The certificate code's client, recording each request (method and path) and running
    ``before`` first: another client writing at exactly that moment, against the real server."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api)
        self.requests: list[tuple[str, str]] = []
        self.before: Hook | None = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.requests.append((method, path))
        if self.before is not None:
            self.before(method, path, body)
        return super()._request(method, path, body)
