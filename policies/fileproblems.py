"""The problems of a strict settings file (the config, a test suite) in draguard's words.

Both are pydantic models that refuse unknown keys; pydantic's own messages (``Extra inputs are
not permitted``) say neither which key was meant nor what a YAML file is made of. Here a problem is
one line naming the field as the file spells it (``rules.quota.modee``), and a misspelt key gets
the closest key the file may use, as an unknown manifest field does (``unknown field; did you
mean mode?``).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any, get_args

from pydantic import BaseModel

# Type mismatches in the words of a YAML file.
EXPECTED = {
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "string_type": "must be a string",
}


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation refers to, however wrapped (``list[X] | None``, ``Annotated``...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


@cache
def field_names(root: type[BaseModel]) -> tuple[str, ...]:
    """Every key a file of ``root`` may use, at any depth: what a misspelled key is compared with."""
    seen: list[type[BaseModel]] = [root]
    for model in seen:
        seen += [m for f in model.model_fields.values() for m in _models(f.annotation) if m not in seen]
    return tuple(sorted({f.alias or n for m in seen for n, f in m.model_fields.items()}))


def _path(loc: Sequence[int | str], tags: Collection[str]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in tags and i > 0 and isinstance(loc[i - 1], int):
            continue  # the union member pydantic tried, not a field of the file
        else:
            out += f".{part}" if out else part
    return out or "<root>"


def problem(error: Mapping[str, Any], root: type[BaseModel], tags: Collection[str] = ()) -> str:
    """One pydantic error of a file of ``root`` as a line; ``tags`` are discriminator tags of
    unions, which are no fields of the file."""
    path = _path(error["loc"], tags)
    kind = error["type"]
    if kind == "missing":
        return f"{path}: Required value"
    if kind == "extra_forbidden":
        field = str(error["loc"][-1])
        close = difflib.get_close_matches(field, field_names(root), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"{path}: unknown field{hint}"
    message = EXPECTED.get(kind) or str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if isinstance(value, (str, int, float, bool)):
        return f"{path}: Invalid value: {value!r}: {message}"
    return f"{path}: {message}"
