"""``--api-versions`` as kube-apiserver's ``--runtime-config`` (``policies.api.runtimeconfig``).

The expectations are what kube-apiserver 1.36.2 served (its discovery of resource.k8s.io) when
started with the same entries; the real server with ``resource.k8s.io/v1beta2/devicetaintrules=true``
is also the one ``tests/kube/test_demo_folders.py`` compares with.
"""

from __future__ import annotations

import pytest

from policies.api.runtimeconfig import RuntimeConfig, parse_bool, resource_of

DRA = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule")


def served(entries: str, api_version: str) -> list[str]:
    config = RuntimeConfig.parse(entries.split(","))
    return [kind for kind in DRA if config.serves(api_version, kind)]


def test_a_default_server_serves_v1_only() -> None:
    assert served("", "resource.k8s.io/v1") == list(DRA[:4])
    for older in ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"):
        assert served("", older) == []


def test_a_whole_version_serves_every_resource_of_it() -> None:
    assert served("resource.k8s.io/v1beta2=true", "resource.k8s.io/v1beta2") == list(DRA)
    assert served("resource.k8s.io/v1beta2", "resource.k8s.io/v1beta2") == list(DRA)  # no value: true


def test_one_resource_serves_that_resource_only() -> None:
    entries = "resource.k8s.io/v1beta2/devicetaintrules=true"
    assert served(entries, "resource.k8s.io/v1beta2") == ["DeviceTaintRule"]
    assert served(entries, "resource.k8s.io/v1") == list(DRA[:4])


def test_resource_entries_win_over_version_entries_whatever_their_order() -> None:
    for entries in (
        "resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta2/deviceclasses=false",
        "resource.k8s.io/v1beta2/deviceclasses=false,resource.k8s.io/v1beta2=true",
    ):
        assert "DeviceClass" not in served(entries, "resource.k8s.io/v1beta2")
        assert "ResourceClaim" in served(entries, "resource.k8s.io/v1beta2")


def test_levels_come_first_and_versions_override_them() -> None:
    entries = "api/beta=true,resource.k8s.io/v1beta2/deviceclasses=false"
    assert served(entries, "resource.k8s.io/v1beta1") == list(DRA[:4])
    assert served(entries, "resource.k8s.io/v1beta2") == [k for k in DRA if k != "DeviceClass"]
    assert served(entries, "resource.k8s.io/v1alpha3") == []  # alpha is not beta
    assert served("api/beta=true,resource.k8s.io/v1beta1=false", "resource.k8s.io/v1beta1") == []
    assert served("api/all=false", "resource.k8s.io/v1") == []
    assert served("api/all=false,resource.k8s.io/v1=true", "resource.k8s.io/v1") == list(DRA[:4])


def test_a_default_resource_can_be_turned_off() -> None:
    assert served("resource.k8s.io/v1/resourceclaims=false", "resource.k8s.io/v1") == [
        "DeviceClass",
        "ResourceClaimTemplate",
        "ResourceSlice",
    ]


def test_the_last_entry_for_a_key_wins() -> None:
    assert (
        served("resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta1=false", "resource.k8s.io/v1beta1") == []
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("resource.k8s.io/v9", "Kubernetes 1.36 has no group version resource.k8s.io/v9 (it has "),
        ("resource.k8s.io/v1beta2=maybe", "invalid value of resource.k8s.io/v1beta2: expected true or false"),
        ("api/beta=yes", "invalid value of api/beta"),
        (
            "resource.k8s.io/v1beta2/DeviceTaintRules=true",
            "resource is always lowercase plural, not 'DeviceTaintRules'",
        ),
        (
            "resource.k8s.io/v1beta2/gadgets",
            "resource.k8s.io/v1beta2 has no resource gadgets (it has deviceclasses",
        ),
        ("resource.k8s.io", "invalid key resource.k8s.io: expected GROUP/VERSION or GROUP/VERSION/RESOURCE"),
    ],
)
def test_entries_the_server_refuses_are_refused(entry: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        RuntimeConfig.parse([entry])
    assert problem in str(raised.value)


def test_groups_that_are_not_kubernetes_own_are_ignored_as_the_server_ignores_them() -> None:
    config = RuntimeConfig.parse(["gpu.nvidia.com/v1beta1=true"])
    assert config.versions == RuntimeConfig.parse([]).versions and config.resources == {}


def test_resource_names_as_apimachinery_guesses_them() -> None:
    assert [resource_of(k) for k in ("DeviceClass", "NetworkPolicy", "Ingress", "Endpoints", "Pod")] == [
        "deviceclasses",
        "networkpolicies",
        "ingresses",
        "endpoints",
        "pods",
    ]


def test_booleans_as_go_parses_them() -> None:
    assert [parse_bool(v) for v in ("1", "t", "TRUE", "True", "0", "f", "FALSE", "false")] == [True] * 4 + [
        False
    ] * 4
    with pytest.raises(ValueError, match="expected true or false"):
        parse_bool("yes")
