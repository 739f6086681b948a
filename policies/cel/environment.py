"""Which DRA CEL environment an expression is compiled in.

Upstream keeps two environments (``k8s.io/apiserver/pkg/cel/environment``): *StoredExpressions*,
used by the scheduler for selectors already stored in the API, which declares every library and
field regardless of feature gates; and *NewExpressions*, used by API validation of new writes,
which only declares what the compatibility version and the enabled feature gates allow
(``k8s.io/dynamic-resource-allocation/cel/compile.go``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EngineName = Literal["rust", "celpy"]
EnvKind = Literal["stored", "new"]


@dataclass(frozen=True)
class Environment:
    """The compile options that change what an expression means.

    ``list_type_attributes`` (DRAListTypeAttributes) changes both typing (attributes become ``dyn``
    instead of ``any``) and evaluation (list attributes convert instead of failing), so it matters
    in both kinds. ``consumable_capacity`` (DRAConsumableCapacity) only decides whether
    ``device.allowMultipleAllocations`` is declared for new writes; stored expressions always see it.
    """

    kind: EnvKind = "stored"
    list_type_attributes: bool = False
    consumable_capacity: bool = True
    engine: EngineName = "rust"

    @property
    def declares_allow_multiple_allocations(self) -> bool:
        return self.kind == "stored" or self.consumable_capacity

    @property
    def declares_includes(self) -> bool:
        return self.kind == "stored" or self.list_type_attributes


DEFAULT_ENVIRONMENT = Environment()
