"""What one manifest document is to draguard, read as a Kubernetes 1.36 API server reads it.

Every document is accounted for, the way ``kubectl apply`` against a default 1.36 server would
account for it:

* a kind draguard checks (the DRA kinds, Pod, Node, Namespace, ResourceQuota, PriorityClass) is
  decoded strictly (:mod:`policies.validation.strict`: unknown and duplicate fields, wrong JSON
  types) and becomes a model;
* a workload (Deployment, Job, ...; :mod:`policies.api.workloads`) is decoded strictly as a whole,
  and its pod template becomes the Pod it stands for;
* a version (or one kind of it) the server does not serve is refused as a default server refuses
  it, naming the fix; ``api_versions`` (the server's ``--runtime-config``,
  :mod:`policies.api.runtimeconfig`) says what it serves; an older DRA version it serves is
  converted to the version 1.36 stores (:mod:`policies.api.conversion`) and then read as that; a
  version or a field that 1.36 no longer has at all is refused naming what replaced it;
* any other kind Kubernetes serves, and any custom resource, is skipped but for its metadata,
  which every kind shares: that is decoded strictly, for the API server's checks of any object
  (:mod:`policies.validation.othermeta`); the caller notes the kind once (``strict_kinds`` makes
  such a document an error instead);
* a kind or a version of Kubernetes' own groups that 1.36 does not serve is an error, as the
  server answers it (no such kind), with the versions that do serve it.

Pure: the document comes in, a :class:`Reading` comes out.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from policies.api import conversion, runtimeconfig, schema, workloads
from policies.api.base import ObjectMeta, TypedObject
from policies.api.core import Pod
from policies.api.kinds import DecodeError, decode, decode_as, under, validation_problems
from policies.validation.fielderrors import Path, go_quote, invalid, render
from policies.validation.strict import is_strict, strict_errors

UnknownFields = Literal["error", "warn", "ignore"]
_OBJECT_META = "meta.v1.ObjectMeta"
UNKNOWN_FIELD_MODES: tuple[UnknownFields, ...] = ("error", "warn", "ignore")

# The kinds resource.k8s.io/v1alpha2 (classic DRA, removed in 1.31) had, and what to write instead.
_V1ALPHA2_REPLACEMENTS = {
    "ResourceClass": "ResourceClass is replaced by DeviceClass (resource.k8s.io/v1)",
    "ResourceClaim": "write it as a resource.k8s.io/v1 ResourceClaim, whose requests name a DeviceClass",
    "ResourceClaimTemplate": (
        "write it as a resource.k8s.io/v1 ResourceClaimTemplate, whose requests name a DeviceClass"
    ),
    "ResourceClaimParameters": (
        "ResourceClaimParameters is replaced by the opaque config of a ResourceClaim (spec.devices.config)"
    ),
    "ResourceClassParameters": (
        "ResourceClassParameters is replaced by the opaque config of a DeviceClass (spec.config)"
    ),
    "ResourceSlice": "drivers publish resource.k8s.io/v1 ResourceSlices",
    "PodSchedulingContext": "PodSchedulingContext is gone: the scheduler allocates claims itself",
}

@dataclass(frozen=True)
class ReadOptions:
    """How strictly to read: the command-line flags every command shares."""

    api_versions: runtimeconfig.RuntimeConfig = runtimeconfig.DEFAULT
    unknown_fields: UnknownFields = "error"
    skip_kinds: frozenset[str] = frozenset()
    strict_kinds: bool = False
    # The API server's --allow-privileged, for the validation that follows the reading.
    allow_privileged: bool = True


DEFAULTS = ReadOptions()

# Why a document is skipped (``--strict-kinds`` makes these errors).
NOT_CHECKED = "a Kubernetes kind draguard does not check"
CUSTOM_RESOURCE = "a custom resource"


@dataclass
class Reading:
    """One document: who it is, the object read from it (None when it is skipped or cannot be
    read), and what reading it found.

    For a workload, ``obj`` is its template's Pod (named after the workload), ``template`` where
    the template is in it and ``workload`` the workload's JSON (its own rules need it).
    ``skipped`` says why a document is not checked beyond its metadata (one note per kind is the
    caller's to print); ``meta`` is that metadata, when it could be read.
    """

    api_version: str
    kind: str
    name: str
    namespace: str
    obj: TypedObject | None = None
    template: tuple[str, ...] | None = None
    workload: Mapping[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None
    meta: ObjectMeta | None = None

    @property
    def metadata_only(self) -> bool:
        """A document of which only the metadata is checked (a kind draguard does not check)."""
        return self.skipped in (NOT_CHECKED, CUSTOM_RESOURCE)

    @property
    def namespaced(self) -> bool:
        return bool(schema.is_namespaced(self.api_version, self.kind))

    @property
    def label(self) -> str:
        """``ResourceClaim team-a/gpu`` (or the parts known), for lines about this document."""
        name = f"{self.namespace}/{self.name}" if self.namespace and self.name else self.name
        return f"{self.kind or '<no kind>'} {name or '<no name>'}"


def _identity(raw: Any) -> tuple[str, str, str, str]:
    if not isinstance(raw, Mapping):
        return "", "", "", ""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or ""
    namespace = meta.get("namespace") or ""

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    return text(raw.get("apiVersion")), text(raw.get("kind")), text(name), text(namespace)


def read(raw: Any, options: ReadOptions = DEFAULTS) -> Reading:
    """What ``raw`` (one document's JSON) is, decoded as far as the API server would decode it."""
    reading = Reading(*_identity(raw))
    if not isinstance(raw, Mapping):
        reading.errors.append(str(invalid(Path.from_text("<root>"), raw, "must be an object")))
        return reading
    if not reading.kind:
        reading.errors.append("kind: Required value: every Kubernetes object names its kind")
        return reading
    if not reading.api_version:
        reading.errors.append("apiVersion: Required value: every Kubernetes object names its apiVersion")
        return reading
    if reading.kind in options.skip_kinds:
        reading.skipped = "--skip-kinds"
        return reading
    refusal = _refusal(reading.api_version, reading.kind, options)
    if refusal is not None:
        reading.errors.append(refusal)
        return reading
    type_name = schema.object_type(reading.api_version, reading.kind)
    if type_name is None:
        _skip(reading, options)
        if reading.skipped is not None:
            _read_metadata(raw.get("metadata"), reading, options)
        return reading
    if not _decoded_strictly(raw, type_name, reading, options):
        return reading
    if conversion.target_version(reading.api_version, reading.kind) is not None:
        raw = conversion.convert(dict(raw))
    template = workloads.template_path(reading.api_version, reading.kind)
    try:
        if template is None:
            reading.obj = decode(raw)
        else:
            reading.obj = decode_as(Pod, workloads.pod_of(raw, template))
            reading.template, reading.workload = template, raw
    except DecodeError as err:
        where = "" if template is None else ".".join(template) + "."
        reading.errors += [p if p.startswith("<root>") else where + p for p in err.problems]
    return reading


def _skip(reading: Reading, options: ReadOptions) -> None:
    builtin = schema.builtin_group(schema.group_of(reading.api_version))
    why = NOT_CHECKED if builtin else CUSTOM_RESOURCE
    if options.strict_kinds:
        reading.errors.append(f"kind: Unsupported value: {go_quote(reading.kind)}: {why} (--strict-kinds)")
    else:
        reading.skipped = why


def _read_metadata(raw: Any, reading: Reading, options: ReadOptions) -> None:
    """The metadata of a document otherwise skipped, decoded strictly as every kind's is."""
    if not _decoded_strictly(raw, _OBJECT_META, reading, options, at="metadata"):
        return
    try:
        reading.meta = ObjectMeta.model_validate(raw or {}, by_alias=True, by_name=False)
    except ValidationError as err:
        reading.errors += [under("metadata", p) for p in validation_problems(err)]


def _decoded_strictly(
    raw: Any, type_name: str, reading: Reading, options: ReadOptions, at: str = ""
) -> bool:
    """Strict decoding's problems into ``reading``; False when the server would stop there."""
    errs = strict_errors(raw, type_name, at)
    strict = [e for e in errs if is_strict(e)]
    fatal = [e for e in errs if not is_strict(e)]
    if options.unknown_fields == "error" or fatal:
        reading.errors += render(fatal if fatal else strict)
        return not (fatal or strict)
    if options.unknown_fields == "warn":
        reading.warnings += render(strict)
    return True


def _refusal(api_version: str, kind: str, options: ReadOptions) -> str | None:
    """Why a 1.36 server (with ``options.api_versions`` as its ``--runtime-config``) refuses this
    apiVersion and kind."""
    group = schema.group_of(api_version)
    if api_version == f"{conversion.GROUP}/v1alpha2" and kind in _V1ALPHA2_REPLACEMENTS:
        return (
            f"apiVersion: Unsupported value: {go_quote(api_version)}: classic DRA was removed in "
            f"Kubernetes 1.31; {_V1ALPHA2_REPLACEMENTS[kind]}"
        )
    kinds = schema.served_kinds(api_version)
    if kinds is None or kind not in kinds:
        return _not_served(api_version, kind, group) if schema.builtin_group(group) else None
    if not options.api_versions.serves(api_version, kind):
        return _not_enabled(api_version, kind, options.api_versions)
    return None


def _not_served(api_version: str, kind: str, group: str) -> str:
    elsewhere = schema.versions_serving(kind, group) or schema.versions_serving(kind)
    if elsewhere:
        return (
            f"apiVersion: Unsupported value: {go_quote(api_version)}: Kubernetes 1.36 serves {kind} as "
            f"{' and '.join(elsewhere)}"
        )
    served = schema.served_kinds(api_version)
    if served is None:
        return f"apiVersion: Unsupported value: {go_quote(api_version)}: not served by Kubernetes 1.36"
    close = difflib.get_close_matches(kind, list(served), n=1)
    hint = f" (did you mean {go_quote(close[0])}?)" if close else ""
    return f"kind: Unsupported value: {go_quote(kind)}: no such kind in {api_version}{hint}"


def _not_enabled(api_version: str, kind: str, config: runtimeconfig.RuntimeConfig) -> str:
    """A kind the server knows in this version but does not serve: for the older DRA versions a
    default server keeps off, how to convert or serve them; otherwise kubectl's words (its
    discovery has no such kind there) and which ``--api-versions`` entry made it so."""
    resource = runtimeconfig.resource_of(kind)
    entry = f"{api_version}/{resource}=true"
    enabled = config.enabled_resources(api_version)
    if config.versions.get(api_version) or enabled or api_version not in schema.OFF_BY_DEFAULT:
        flag = f"--api-versions {','.join(config.entries)}"
        why = f"{flag} serves only {', '.join(enabled)} of it" if enabled else f"{flag} turns it off"
        return (
            f"apiVersion: Unsupported value: {go_quote(api_version)}: no matches for kind {go_quote(kind)} "
            f"in version {go_quote(api_version)}: {why} (add {entry} if your API server serves it)"
        )
    target = conversion.target_version(api_version, kind) or api_version
    if kind == "DeviceTaintRule":
        converted = f" (read as {target}: see `draguard convert -f FILE`)" if target != api_version else ""
        return (
            f"apiVersion: Unsupported value: {go_quote(api_version)}: a default 1.36 API server does not "
            f"serve DeviceTaintRule (it is {conversion.V1BETA2} in 1.36, behind the DRADeviceTaintRules "
            "feature gate, which is off by default); if your cluster serves it "
            f"(--runtime-config={entry}), pass --api-versions {entry}{converted}"
        )
    return (
        f"apiVersion: Unsupported value: {go_quote(api_version)}: not served by default by Kubernetes "
        f"1.36 since {conversion.V1} went GA; write it as {target} (`draguard convert -f FILE` prints "
        f"it converted), or pass --api-versions {api_version} if your API server serves it "
        "(--runtime-config)"
    )
