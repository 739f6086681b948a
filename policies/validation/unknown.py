"""Fields the API does not define, reported the way strict decoding does (``unknown field "spec.foo"``).

The models keep unknown fields (so nothing is lost in a round trip); this walks a decoded object
and names each one with its full path. ``kubectl apply`` validates strictly by default, so a typo
such as ``deviceClass:`` for ``deviceClassName:`` fails there instead of being silently dropped,
and draguard reports it too. Only kinds whose models are complete may be walked: for the others
(Pod, Node, ...), draguard types just the fields it reads and everything else is "extra".
"""

from __future__ import annotations

from policies.api.base import ApiModel
from policies.validation.fielderrors import ErrorList, Path, unknown_field


def unknown_fields(model: ApiModel, path: Path | None = None) -> ErrorList:
    path = path or Path()
    errs: ErrorList = []
    for name, info in type(model).model_fields.items():
        errs += _walk(getattr(model, name), path.child(info.alias or name))
    for name in model.model_extra or {}:
        errs.append(unknown_field(path.child(name)))
    return errs


def _walk(value: object, path: Path) -> ErrorList:
    if isinstance(value, ApiModel):
        return unknown_fields(value, path)
    errs: ErrorList = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            errs += _walk(item, path.index(i))
    elif isinstance(value, dict):
        # Strict decoding names a map entry like a field: "attributes.model.foo".
        for key, item in value.items():
            errs += _walk(item, path.child(str(key)))
    return errs
