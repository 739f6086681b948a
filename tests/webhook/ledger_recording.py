"""The quota ledger's client on the real API server, recording what it asks (for the ledger tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from controlplane import ControlPlane
from kubernetes import client

from webhook.ledger import READ_TIMEOUT, ConfigMaps, Conflict

Hook = Callable[[str, str, Any], None]


class Seen:
    """What recording clients saw, shared by several of them (the replicas of one test): each
    request sent, and ``before``, run first (another replica writing at exactly that moment)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.before: Hook | None = None

    @property
    def writes(self) -> int:
        return sum(method in ("POST", "PUT") for method, _ in self.requests)


class RecordingConfigMaps(ConfigMaps):
    """:class:`ConfigMaps` recording into ``seen`` the requests it sends, and counting conflicts."""

    def __init__(
        self, api: client.ApiClient, seen: Seen | None = None, read_timeout: float = READ_TIMEOUT
    ) -> None:
        super().__init__(api, read_timeout=read_timeout)
        self.seen = seen or Seen()
        self.conflicts = 0

    def _call(
        self, method: str, path: str, body: Any = None, deadline: float | None = None
    ) -> tuple[int, Any]:
        self._timeouts_until(deadline, f"{method} {path}")  # one out of time is never sent
        self.seen.requests.append((method, path))
        if self.seen.before is not None:
            self.seen.before(method, path, body)
        return super()._call(method, path, body, deadline)

    def write(self, namespace: str, data: Any, base: Any, deadline: float | None = None) -> Any:
        try:
            return super().write(namespace, data, base, deadline)
        except Conflict:
            self.conflicts += 1
            raise


@contextlib.contextmanager
def namespace_named(plane: ControlPlane, name: str) -> Iterator[str]:
    """A namespace of this name for a test module, whose ledger ConfigMaps the tests write."""
    core = client.CoreV1Api(plane.client())
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)
