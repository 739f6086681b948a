"""Strict decoding: what the API server says about a document before it validates anything.

With strict field validation (``kubectl``'s default, ``fieldValidation=Strict``) the API server's
decoder refuses a body with fields its Go types do not have and keys written twice, listing
them all as ``unknown field "spec.nodeNme"`` / ``duplicate field "metadata.name"`` (paths as
sigs.k8s.io/json builds them: list items ``[i]``, map entries like fields); a JSON type its field
cannot hold (``replicas: "2"``) fails the decoding as well. The fields come from the API
server's own OpenAPI (:mod:`policies.api.schema`), so every kind draguard checks is covered to
the last field, not only the parts draguard models.

A document whose strict decoding fails is never validated: the server stops there too.
"""

from __future__ import annotations

import difflib
from typing import Any

from policies.api import schema
from policies.api.conversion import EXACT_FIELDS
from policies.api.quantity import Quantity
from policies.validation.fielderrors import (
    ErrorList,
    ErrorType,
    FieldError,
    Path,
    duplicate_field,
    go_quote,
    invalid,
    unknown_field,
)

# Fields a 1.36 server does not know that older manifests use, and what to write instead.
REPLACED_FIELDS = {
    ("core.v1.PodResourceClaim", "source"): (
        "removed in Kubernetes 1.31: write resourceClaimName or resourceClaimTemplateName in the "
        "entry itself"
    ),
    ("resource.v1.Device", "basic"): (
        "resource.k8s.io/v1 has no basic: its attributes, capacity, ... are the device's own fields "
        "(basic was v1beta1's)"
    ),
    **{
        ("resource.v1.DeviceRequest", name): (
            f"in resource.k8s.io/v1 {name} goes under exactly: (a request had it directly in v1beta1)"
        )
        for name in EXACT_FIELDS
    },
}


class _Shown:
    """A composite bad value, shown by what it is (``object``, ``list``) rather than dumped."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text


def _shown(value: Any) -> Any:
    if isinstance(value, dict):
        return _Shown("object")
    if isinstance(value, list):
        return _Shown("list")
    return value


def _scalar_problem(word: str, value: Any) -> str | None:
    """What is wrong with ``value`` where the table says ``word``, or None."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if word == "string":
        ok = isinstance(value, str)
    elif word == "integer":
        # Go's decoder refuses 2.0 for an int field as it refuses 2.5.
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif word == "number":
        ok = is_number
    elif word == "boolean":
        ok = isinstance(value, bool)
    elif word == "quantity":
        if isinstance(value, str) or is_number:
            return _quantity_problem(value)
        ok = False
        word = "a quantity (a string such as 1Gi, or a number)"
    elif word == "int-or-string":
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        word = "an integer or a string"
    else:  # "any": raw JSON kept as written
        return None
    if ok:
        return None
    return f"must be {word}" if " " in word else f"must be {'an' if word[0] in 'aeiou' else 'a'} {word}"


def _quantity_problem(value: str | int | float) -> str | None:
    """The decoder parses quantities as it reads them: a malformed one fails the whole document
    (the server's message names no field; this one does)."""
    try:
        Quantity.from_json(value)
    except ValueError as err:
        return str(err)
    return None


def strict_errors(raw: Any, type_name: str, at: str = "") -> ErrorList:
    """Every unknown field, duplicate field and JSON type mismatch in ``raw`` read as ``type_name``
    (``raw`` being the field ``at`` of the document, when it is not the whole document)."""
    errs: ErrorList = []
    _walk(raw, type_name, [f".{at}"] if at else [], errs)
    return errs


def _path(parts: list[str]) -> Path:
    return Path.from_text("".join(parts).removeprefix("."))


def _walk(value: Any, word: str, parts: list[str], errs: ErrorList) -> None:
    if value is None:
        return  # null is every field's zero value to Go's decoder
    if word.startswith("[]"):
        if not isinstance(value, list):
            errs.append(invalid(_path(parts), _shown(value), "must be a list"))
            return
        item = word[2:]
        if item in ("string", "integer", "boolean", "number") and all(
            _scalar_problem(item, v) is None for v in value
        ):
            return
        for i, v in enumerate(value):
            parts.append(f"[{i}]")
            _walk(v, item, parts, errs)
            parts.pop()
        return
    if word.startswith("{}"):
        if not isinstance(value, dict):
            errs.append(invalid(_path(parts), _shown(value), "must be an object"))
            return
        _members(value, None, lambda _key: word[2:], parts, errs)
        return
    if schema.is_struct(word):
        if not isinstance(value, dict):
            errs.append(invalid(_path(parts), _shown(value), "must be an object"))
            return
        _members(value, word, schema.fields(word).get, parts, errs)
        return
    problem = _scalar_problem(word, value)
    if problem is not None:
        errs.append(invalid(_path(parts), _shown(value), problem))


def _members(
    value: dict[str, Any], owner: str | None, word_of: Any, parts: list[str], errs: ErrorList
) -> None:
    """The entries of an object: a struct ``owner``'s fields, or a map's values (``owner`` None)."""
    for key in getattr(value, "duplicates", ()):
        parts.append(f".{key}")
        errs.append(duplicate_field(_path(parts)))
        parts.pop()
    for key, member in value.items():
        parts.append(f".{key}")
        word = word_of(key)
        if word is None:
            errs.append(unknown_field(_path(parts), _hint(owner, key)))
        else:
            _walk(member, word, parts, errs)
        parts.pop()


def _hint(owner: str | None, key: str) -> str:
    """What replaced a field older manifests use, else the closest field the type has (a misspelt
    ``nodeNme``); nothing for a map's key or a key like no field. Either follows the server's
    words, which name the field only."""
    if owner is None:
        return ""
    replaced = REPLACED_FIELDS.get((owner, key))
    if replaced is not None:
        return replaced
    close = difflib.get_close_matches(key, list(schema.fields(owner)), n=1)
    return f"did you mean {go_quote(close[0])}?" if close else ""


def is_strict(err: FieldError) -> bool:
    """Unknown and duplicate fields: the problems ``--unknown-fields`` may turn into warnings."""
    return err.type in (ErrorType.UNKNOWN_FIELD, ErrorType.DUPLICATE_FIELD)
