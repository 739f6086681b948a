"""Fixtures for the chart tests; the rendering itself is in ``helm_render``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from controlplane import cannot_run
from helm_render import HELM_MISSING, render


@pytest.fixture(scope="session")
def default_objects() -> list[dict[str, Any]]:
    if HELM_MISSING:
        cannot_run(HELM_MISSING)
    return render()


@pytest.fixture
def find() -> Callable[[list[dict[str, Any]], str, str | None], dict[str, Any]]:
    def _find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
        matches = [
            o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
        ]
        assert len(matches) == 1, (
            f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in matches]}"
        )
        return matches[0]

    return _find
