"""Which model decodes which ``apiVersion``/``kind``, and the one place raw JSON becomes a model.

Every entry point (manifest files, the API server's list/watch, an AdmissionReview's object, the
dry-run endpoint) decodes through :func:`decode`, so a wrong kind or a string where a list belongs
is reported the same way everywhere: one line per problem, with the field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from policies.api import core, resource, scheduling
from policies.api.base import TypedObject

# DeviceTaintRule is v1beta2 in 1.36 and v1 in 1.37: accept both.
KINDS: dict[tuple[str, str], type[TypedObject]] = {
    (resource.API_VERSION, "DeviceClass"): resource.DeviceClass,
    (resource.API_VERSION, "ResourceClaim"): resource.ResourceClaim,
    (resource.API_VERSION, "ResourceClaimTemplate"): resource.ResourceClaimTemplate,
    (resource.API_VERSION, "ResourceSlice"): resource.ResourceSlice,
    (resource.API_VERSION, "DeviceTaintRule"): resource.DeviceTaintRule,
    ("resource.k8s.io/v1beta2", "DeviceTaintRule"): resource.DeviceTaintRule,
    ("v1", "Pod"): core.Pod,
    ("v1", "Node"): core.Node,
    ("v1", "Namespace"): core.Namespace,
    ("v1", "ResourceQuota"): core.ResourceQuota,
    (scheduling.API_VERSION, "PriorityClass"): scheduling.PriorityClass,
}

T = TypeVar("T", bound=TypedObject)

KNOWN_KINDS = sorted({kind for _, kind in KINDS})

# Namespaced kinds, and where kubectl puts one whose manifest names no namespace.
NAMESPACED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod", "ResourceQuota"})
DEFAULT_NAMESPACE = "default"


class DecodeError(ValueError):
    """The JSON is not a valid object of a kind draguard knows; ``problems`` are ``path: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def format_loc(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a Kubernetes field path: ``spec.devices.requests[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or part.startswith("function-"):
            continue  # pydantic's internal union/validator tags are not part of the field path
        else:
            out += f".{part}" if out else part
    return out


# What each JSON type mismatch means, in the words the fix needs.
_EXPECTED = {
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be a boolean",
    "float_type": "must be a number",
}


def _shown(value: Any) -> str:
    """A bad scalar as written (``'abc'``, ``2.5``, ``True``); a composite value by its kind."""
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return repr(value)
    return type(value).__name__


def validation_problems(err: ValidationError) -> list[str]:
    """Turn a pydantic error into kubectl-like lines that name the field and what was wrong."""
    problems: list[str] = []
    for e in err.errors(include_url=False):
        path = format_loc(e["loc"]) or "<root>"
        if e["type"] == "missing":
            line = f"{path}: Required value"
        else:
            message = _EXPECTED.get(e["type"]) or str(e["msg"]).removeprefix("Value error, ")
            line = f"{path}: Invalid value: {_shown(e.get('input'))}: {message}"
        if line not in problems:
            problems.append(line)
    return problems


def under(field: str, problem: str) -> str:
    """A problem line of a nested object (``spec.x: ...``, ``<root>: ...``) as a path from its
    parent (``object.spec.x: ...``, ``object: ...``)."""
    if problem.startswith("<root>"):
        return field + problem.removeprefix("<root>")
    return f"{field}.{problem}"


def model_for(api_version: str, kind: str) -> type[TypedObject]:
    try:
        return KINDS[(api_version, kind)]
    except KeyError:
        if kind in KNOWN_KINDS:
            wanted = sorted(v for v, k in KINDS if k == kind)
            raise DecodeError(
                [f"apiVersion: Unsupported value: {api_version!r}: {kind} must be {' or '.join(wanted)}"]
            ) from None
        raise DecodeError(
            [f"kind: Unsupported value: {kind!r}: supported kinds: {', '.join(KNOWN_KINDS)}"]
        ) from None


def decode(data: Any) -> TypedObject:
    """Decode one object; raises :class:`DecodeError` with field paths on any problem."""
    if not isinstance(data, Mapping):
        raise DecodeError([f"<root>: Invalid value: {_shown(data)}: must be an object"])
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise DecodeError(["kind: Required value"])
    if not isinstance(api_version, str) or not api_version:
        raise DecodeError(["apiVersion: Required value"])
    return decode_as(model_for(api_version, kind), data)


def decode_as(model: type[T], data: Any) -> T:
    """``data`` as a ``model``, for a caller that already knows which model its kind is."""
    try:
        # By wire name only: "device_class_name" is an unknown field, not an alias of deviceClassName.
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as err:
        raise DecodeError(validation_problems(err)) from None
