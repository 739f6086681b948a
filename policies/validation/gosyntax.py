"""Bad values that the API server prints with Go's ``%#v``.

``field.Error.ErrorBody`` (apimachinery ``util/validation/field/errors.go``) prints numbers, booleans
and strings plainly, a ``fmt.Stringer`` through ``String()``, and anything else, structs and slices of
the *internal* API types among them, with ``%#v``: ``[]bool{}``, ``[]string(nil)``,
``core.NodeSelectorTerm{MatchExpressions:..., MatchFields:...}``. Where such a value holds no
pointer, the text is fully determined by the object and is reproduced here exactly. A non-nil
pointer prints as its address, which is different in every API server process; it is shown as
:data:`POINTER` so the shape of the line still matches.

The values are built by the validators from the models they already hold, typed by the Go type the
API server would have passed (``[]int64`` for ``ints``, ``core.NodeSelectorTerm`` for a term...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from policies.api import resource as r
from policies.api.base import NodeSelectorRequirement, NodeSelectorTerm, ObjectMeta, OwnerReference
from policies.validation.fielderrors import go_quote

# What a non-nil pointer prints as: a plausible heap address (the real one is not reproducible).
POINTER = "0xc000000000"


@dataclass(frozen=True)
class GoSyntax:
    """A value already rendered as ``%#v`` would; printed verbatim in an error line."""

    text: str

    def __str__(self) -> str:
        return self.text


def slice_of(elem_type: str, items: Iterable[str] | None) -> str:
    """``[]T(nil)`` for a nil slice, ``[]T{}`` for an empty one, ``[]T{a, b}`` otherwise."""
    if items is None:
        return f"[]{elem_type}(nil)"
    return f"[]{elem_type}{{{', '.join(items)}}}"


def struct(type_name: str, fields: Sequence[tuple[str, str]]) -> str:
    return f"{type_name}{{{', '.join(f'{name}:{value}' for name, value in fields)}}}"


def pointer(elem_type: str, is_set: bool) -> str:
    return f"(*{elem_type})({POINTER if is_set else 'nil'})"


def strings(values: Sequence[str] | None) -> str:
    return slice_of("string", None if values is None else [go_quote(v) for v in values])


def ints(values: Sequence[int] | None) -> str:
    return slice_of("int64", None if values is None else [str(v) for v in values])


def bools(values: Sequence[bool] | None) -> str:
    return slice_of("bool", None if values is None else ["true" if v else "false" for v in values])


def _requirement(req: NodeSelectorRequirement) -> str:
    return struct(
        "core.NodeSelectorRequirement",
        [("Key", go_quote(req.key)), ("Operator", go_quote(req.operator)), ("Values", strings(req.values))],
    )


def _requirements(reqs: Sequence[NodeSelectorRequirement] | None) -> str:
    return slice_of("core.NodeSelectorRequirement", None if reqs is None else [_requirement(r) for r in reqs])


def node_selector_term(term: NodeSelectorTerm) -> str:
    return struct(
        "core.NodeSelectorTerm",
        [
            ("MatchExpressions", _requirements(term.match_expressions)),
            ("MatchFields", _requirements(term.match_fields)),
        ],
    )


def node_selector_terms(terms: Sequence[NodeSelectorTerm] | None) -> GoSyntax:
    """``[]core.NodeSelectorTerm{...}`` as the slice node-selector check prints it."""
    return GoSyntax(
        slice_of("core.NodeSelectorTerm", None if terms is None else [node_selector_term(t) for t in terms])
    )


# --- whole specs, as "field is immutable" shows them -----------------------------------------------------
#
# ValidateImmutableField passes the new internal value; the field lists follow the 1.36 internal types
# (pkg/apis/resource/types.go, metav1.ObjectMeta). The objects arrive defaulted, as in the API server.


def _string_map(values: Mapping[str, str] | None) -> str:
    if values is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in sorted(values.items()))
    return f"map[string]string{{{items}}}"


def _toleration(t: r.DeviceToleration) -> str:
    return struct(
        "resource.DeviceToleration",
        [
            ("Key", go_quote(t.key or "")),
            ("Operator", go_quote(t.operator or "")),
            ("Value", go_quote(t.value or "")),
            ("Effect", go_quote(t.effect or "")),
            ("TolerationSeconds", pointer("int64", t.toleration_seconds is not None)),
        ],
    )


def _selectors(selectors: Sequence[r.DeviceSelector] | None) -> str:
    return slice_of(
        "resource.DeviceSelector",
        None
        if selectors is None
        else [
            struct(
                "resource.DeviceSelector", [("CEL", pointer("resource.CELDeviceSelector", s.cel is not None))]
            )
            for s in selectors
        ],
    )


def _subrequest(sub: r.DeviceSubRequest) -> str:
    tolerations = sub.tolerations
    return struct(
        "resource.DeviceSubRequest",
        [
            ("Name", go_quote(sub.name)),
            ("DeviceClassName", go_quote(sub.device_class_name)),
            ("Selectors", _selectors(sub.selectors)),
            ("AllocationMode", go_quote(sub.allocation_mode or "")),
            ("Count", str(sub.count or 0)),
            (
                "Tolerations",
                slice_of(
                    "resource.DeviceToleration",
                    None if tolerations is None else [_toleration(t) for t in tolerations],
                ),
            ),
            ("Capacity", pointer("resource.CapacityRequirements", sub.capacity is not None)),
        ],
    )


def _request(req: r.DeviceRequest) -> str:
    subs = req.first_available
    return struct(
        "resource.DeviceRequest",
        [
            ("Name", go_quote(req.name)),
            ("Exactly", pointer("resource.ExactDeviceRequest", req.exactly is not None)),
            (
                "FirstAvailable",
                slice_of("resource.DeviceSubRequest", None if subs is None else map(_subrequest, subs)),
            ),
        ],
    )


def _constraint(c: r.DeviceConstraint) -> str:
    return struct(
        "resource.DeviceConstraint",
        [
            ("Requests", strings(c.requests)),
            ("MatchAttribute", pointer("resource.FullyQualifiedName", c.match_attribute is not None)),
            ("DistinctAttribute", pointer("resource.FullyQualifiedName", c.distinct_attribute is not None)),
        ],
    )


def _claim_config(c: r.DeviceClaimConfiguration) -> str:
    opaque = pointer("resource.OpaqueDeviceConfiguration", c.opaque is not None)
    return struct(
        "resource.DeviceClaimConfiguration",
        [
            ("Requests", strings(c.requests)),
            ("DeviceConfiguration", struct("resource.DeviceConfiguration", [("Opaque", opaque)])),
        ],
    )


def _claim_spec(spec: r.ResourceClaimSpec) -> str:
    devices = spec.devices
    reqs, constraints, config = devices.requests, devices.constraints, devices.config
    claim = struct(
        "resource.DeviceClaim",
        [
            ("Requests", slice_of("resource.DeviceRequest", None if reqs is None else map(_request, reqs))),
            (
                "Constraints",
                slice_of(
                    "resource.DeviceConstraint",
                    None if constraints is None else map(_constraint, constraints),
                ),
            ),
            (
                "Config",
                slice_of(
                    "resource.DeviceClaimConfiguration",
                    None if config is None else map(_claim_config, config),
                ),
            ),
        ],
    )
    return struct("resource.ResourceClaimSpec", [("Devices", claim)])


def claim_spec(spec: r.ResourceClaimSpec) -> GoSyntax:
    return GoSyntax(_claim_spec(spec))


_ZERO_TIME = "time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)"
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _go_time(text: str | None) -> str | None:
    """A metav1.Time's GoString: decoded into the server's Local zone (UTC in a container)."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
    fields = f"{t.year}, time.{_MONTHS[t.month - 1]}, {t.day}, {t.hour}, {t.minute}, {t.second}, 0"
    return f"time.Date({fields}, time.Local)"


def _owner(ref: OwnerReference) -> str:
    return struct(
        "v1.OwnerReference",
        [
            ("APIVersion", go_quote(ref.api_version)),
            ("Kind", go_quote(ref.kind)),
            ("Name", go_quote(ref.name)),
            ("UID", go_quote(ref.uid)),
            ("Controller", pointer("bool", ref.controller is not None)),
            ("BlockOwnerDeletion", pointer("bool", ref.block_owner_deletion is not None)),
        ],
    )


def _object_meta(meta: ObjectMeta | None) -> str:
    """metav1.ObjectMeta of a template's spec.metadata (validation allows only labels and annotations)."""
    meta = meta or ObjectMeta()
    return struct(
        "v1.ObjectMeta",
        [
            ("Name", go_quote(meta.name or "")),
            ("GenerateName", go_quote(meta.generate_name or "")),
            ("Namespace", go_quote(meta.namespace or "")),
            ("SelfLink", go_quote(meta.self_link or "")),
            ("UID", go_quote(meta.uid or "")),
            ("ResourceVersion", go_quote(meta.resource_version or "")),
            ("Generation", str(meta.generation or 0)),
            # A time.Time prints through its GoString; a nil *Time through fmt's nil-receiver guard.
            ("CreationTimestamp", _go_time(meta.creation_timestamp) or _ZERO_TIME),
            ("DeletionTimestamp", "<nil>" if meta.deletion_timestamp is None else POINTER),
            ("DeletionGracePeriodSeconds", pointer("int64", meta.deletion_grace_period_seconds is not None)),
            ("Labels", _string_map(meta.labels)),
            ("Annotations", _string_map(meta.annotations)),
            (
                "OwnerReferences",
                slice_of(
                    "v1.OwnerReference",
                    None if meta.owner_references is None else map(_owner, meta.owner_references),
                ),
            ),
            ("Finalizers", strings(meta.finalizers)),
            (
                "ManagedFields",
                slice_of("v1.ManagedFieldsEntry", None if meta.managed_fields is None else [POINTER]),
            ),
        ],
    )


def template_spec(spec: r.ResourceClaimTemplateSpec) -> GoSyntax:
    return GoSyntax(
        struct(
            "resource.ResourceClaimTemplateSpec",
            [("ObjectMeta", _object_meta(spec.metadata)), ("Spec", _claim_spec(spec.spec))],
        )
    )
