"""Which versions and resources an API server serves, given its ``--runtime-config``.

A default Kubernetes 1.36 server serves what :mod:`policies.api.schema` lists, less the versions it
keeps off (:data:`policies.api.schema.OFF_BY_DEFAULT`: resource.k8s.io v1beta1, v1beta2 and
v1alpha3). ``--runtime-config`` entries change that, with the precedence kube-apiserver gives them
(``staging/src/k8s.io/apiserver/pkg/server/resourceconfig/helpers.go`` ``MergeAPIResourceConfigs``,
over ``staging/src/k8s.io/apiserver/pkg/server/storage/resource_config.go``):

1. ``api/all``, ``api/ga``, ``api/beta``, ``api/alpha`` (in that order), each for the versions its
   pattern matches (``v1``, ``v1beta2``, ``v1alpha3``);
2. ``GROUP/VERSION[=true|false]``;
3. ``GROUP/VERSION/RESOURCE[=true|false]``, which win.

An entry of the first two kinds forgets the per-resource entries of the versions it sets, and a
resource is served when its own entry says so, else when its version is served. So
``resource.k8s.io/v1beta2/devicetaintrules=true`` serves DeviceTaintRule as v1beta2 and nothing
else of v1beta2 (checked against kube-apiserver 1.36.2's discovery). A missing value means
``true``; values are read as Go's ``strconv.ParseBool`` reads them. An entry for a group that is
not Kubernetes' own is ignored, as the server ignores groups it has not registered.

Pure: the entries come in as text, :class:`RuntimeConfig` answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from policies.api import schema

# Go's strconv.ParseBool.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

_LEVELS: dict[str, Callable[[str], bool]] = {
    "api/all": lambda version: True,
    "api/ga": lambda version: re.fullmatch(r"v\d+", version) is not None,
    "api/beta": lambda version: re.fullmatch(r"v\d+beta\d+", version) is not None,
    "api/alpha": lambda version: re.fullmatch(r"v\d+alpha\d+", version) is not None,
}

# Kinds whose resource name is not what apimachinery's UnsafeGuessKindToResource makes of them.
_IRREGULAR = {"Endpoints": "endpoints"}


def resource_of(kind: str) -> str:
    """The resource (lowercase plural) of a kind, as ``meta.UnsafeGuessKindToResource`` names it."""
    if kind in _IRREGULAR:
        return _IRREGULAR[kind]
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def _version(api_version: str) -> str:
    return api_version.rpartition("/")[2]


def default_serves(api_version: str) -> bool:
    """Whether a 1.36 server without ``--runtime-config`` serves ``api_version``."""
    return schema.served_kinds(api_version) is not None and api_version not in schema.OFF_BY_DEFAULT


def parse_bool(value: str) -> bool:
    """``value`` as Go's ``strconv.ParseBool`` reads it, as Kubernetes components read boolean
    flags; :class:`ValueError` otherwise."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _value(key: str, value: str) -> bool:
    """An entry's value: none means true (``getRuntimeConfigValue``)."""
    try:
        return value == "" or parse_bool(value)
    except ValueError as err:
        raise ValueError(f"invalid value of {key}: {err}") from None


@dataclass(frozen=True)
class RuntimeConfig:
    """The group/versions and resources served: ``versions`` and ``resources`` hold every
    version's and every resource's setting after the entries were applied (resources only where an
    entry named them); ``entries`` are the entries as given, for messages."""

    versions: dict[str, bool] = field(default_factory=dict)
    resources: dict[tuple[str, str], bool] = field(default_factory=dict)
    entries: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> RuntimeConfig:
        """The server's answer to these ``--runtime-config`` entries; :class:`ValueError` naming
        an entry kube-apiserver would refuse, or a version or resource 1.36 does not have."""
        given = tuple(e.strip() for e in entries if e.strip())
        settings: dict[str, str] = {}
        for entry in given:
            key, _, value = entry.partition("=")
            settings[key] = value  # as in a Go map: the last entry for a key wins
        versions = {gv: default_serves(gv) for gv in schema.known_versions()}
        resources: dict[tuple[str, str], bool] = {}
        for level, matches in _LEVELS.items():
            if level in settings:
                on = _value(level, settings[level])
                for gv in versions:
                    if matches(_version(gv)):
                        versions[gv] = on
        by_version, by_resource = _split(settings)
        for gv, on in by_version.items():
            versions[gv] = on
            resources = {k: v for k, v in resources.items() if k[0] != gv}
        resources.update(by_resource)
        return cls(versions, resources, given)

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether ``kind`` is served as ``api_version``."""
        if kind not in (schema.served_kinds(api_version) or {}):
            return False
        setting = self.resources.get((api_version, resource_of(kind)))
        if setting is not None:
            return setting
        return self.versions.get(api_version, False)

    def enabled_resources(self, api_version: str) -> list[str]:
        """The resources of ``api_version`` that entries turned on one by one."""
        return sorted(r for (gv, r), on in self.resources.items() if gv == api_version and on)


def _split(settings: dict[str, str]) -> tuple[dict[str, bool], dict[tuple[str, str], bool]]:
    """The ``GROUP/VERSION`` and ``GROUP/VERSION/RESOURCE`` settings (levels left out), checked."""
    by_version: dict[str, bool] = {}
    by_resource: dict[tuple[str, str], bool] = {}
    for key, value in settings.items():
        if key in _LEVELS:
            continue
        parts = key.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(
                f"invalid key {key}: expected GROUP/VERSION or GROUP/VERSION/RESOURCE (or api/all, "
                "api/ga, api/beta, api/alpha)"
            )
        group = parts[0]
        api_version = parts[1] if group in ("", "api") else f"{group}/{parts[1]}"
        if not schema.builtin_group("" if group == "api" else group):
            continue  # the server ignores a group it has not registered
        if schema.served_kinds(api_version) is None:
            known = [
                gv for gv in schema.known_versions() if schema.group_of(gv) == schema.group_of(api_version)
            ]
            raise ValueError(
                f"{key}: Kubernetes 1.36 has no group version {api_version}"
                + (f" (it has {', '.join(known)})" if known else "")
            )
        on = _value(key, value)
        if len(parts) == 2:
            by_version[api_version] = on
            continue
        resource = parts[2]
        if resource.lower() != resource:
            raise ValueError(
                f"invalid key {key}: group/version/resource and resource is always lowercase plural, "
                f"not {resource!r}"
            )
        served = sorted(resource_of(kind) for kind in schema.served_kinds(api_version) or {})
        if resource not in served:
            raise ValueError(f"{key}: {api_version} has no resource {resource} (it has {', '.join(served)})")
        by_resource[(api_version, resource)] = on
    return by_version, by_resource


DEFAULT = RuntimeConfig.parse(())
