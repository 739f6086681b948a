"""The documents draguard gives programs, versioned as Kubernetes objects are.

Every ``-o json`` / ``-o yaml`` document carries ``apiVersion: draguard.io/v1alpha1`` and a
``kind``, so that a script or a dashboard can tell which shape it reads instead of breaking
silently when one changes. The shapes are pydantic models (JSON Schema from the models); a change
of shape is a new version.

Pure data: the commands fill them in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

Version = Literal["draguard.io/v1alpha1"]
API_VERSION: Version = "draguard.io/v1alpha1"


class OutputModel(BaseModel):
    """camelCase keys, nothing unknown, frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """camelCase keys; optional fields that do not apply are left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json`'s document as JSON, encoded by pydantic-core in one pass (a tenth of the
        time of building the dicts and ``json.dumps``)."""
        return self.__pydantic_serializer__.to_json(self, by_alias=True, exclude_none=True)
