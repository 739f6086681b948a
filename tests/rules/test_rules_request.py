"""request_from: the one way the webhook, the policy tests and the audit build a rule Request."""

from __future__ import annotations

from typing import Any

import pytest

from policies.api.admission import GroupVersionKind, GroupVersionResource, UserInfo
from policies.api.core import Pod
from policies.api.kinds import KINDS
from policies.api.resource import DeviceClass
from policies.rules.request import RequestError, UndecodableObject, request_from


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"containers": [{"name": "main"}], **spec},
    }


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}}


def test_kind_resource_namespace_and_name_come_from_the_object() -> None:
    request = request_from("CREATE", pod(), None, user=UserInfo(username="alice"))
    assert (request.group, request.version, request.kind, request.resource) == ("", "v1", "Pod", "pods")
    assert (request.namespace, request.name, request.user.username) == ("team-a", "p", "alice")
    assert isinstance(request.obj, Pod) and request.old is None


def test_group_of_a_resource_k8s_io_kind_and_its_plural() -> None:
    request = request_from("UPDATE", DEVICE_CLASS, DEVICE_CLASS)
    assert (request.group, request.version, request.resource) == ("resource.k8s.io", "v1", "deviceclasses")
    assert isinstance(request.obj, DeviceClass) and isinstance(request.old, DeviceClass)
    assert request.namespace == ""


@pytest.mark.parametrize(("api_version", "kind"), sorted(KINDS))
def test_every_kind_draguard_decodes_has_its_resource(api_version: str, kind: str) -> None:
    """The audit asks the rules about every object it reads, so each kind needs its resource (for
    these kinds, the lowercase plural the API server's discovery names)."""
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    assert request_from("CREATE", obj, None).resource == plural


def test_delete_reads_the_old_object() -> None:
    request = request_from("DELETE", None, DEVICE_CLASS)
    assert request.obj is None and request.raw is None
    assert isinstance(request.old, DeviceClass)
    assert (request.resource, request.name) == ("deviceclasses", "gpu")


def test_an_eviction_is_made_on_pods_and_passed_raw() -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"}}
    request = request_from("CREATE", eviction, None, sub_resource="eviction")
    assert (request.group, request.version, request.resource, request.sub_resource) == (
        "", "v1", "pods", "eviction"
    )
    assert request.kind == "Eviction" and request.obj is None and request.raw == eviction
    assert (request.namespace, request.name) == ("ns", "p")


def test_given_kind_resource_and_names_win_over_the_object() -> None:
    request = request_from(
        "CREATE", pod(), None,
        kind=GroupVersionKind(group="", version="v1", kind="Pod"),
        resource=GroupVersionResource(group="", version="v1", resource="pods"),
        sub_resource="status", namespace="other", name="q", uid="u1", dry_run=True,
    )
    shown = (request.namespace, request.name, request.sub_resource, request.uid)
    assert shown == ("other", "q", "status", "u1")
    assert request.dry_run


def test_an_object_that_is_not_valid_names_the_field_inside_the_request() -> None:
    with pytest.raises(UndecodableObject) as err:
        request_from("CREATE", pod(resourceClaims="gpu"), None)
    assert err.value.problems == ("object.spec.resourceClaims: Invalid value: 'gpu': must be a list",)


def test_an_old_object_of_another_kind_is_refused() -> None:
    with pytest.raises(UndecodableObject) as err:
        request_from("UPDATE", pod(), DEVICE_CLASS)
    assert err.value.problems[0].startswith("oldObject: Invalid value: 'resource.k8s.io/v1 DeviceClass'")


def test_unknown_kind_without_a_resource_cannot_be_a_request() -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with pytest.raises(RequestError, match="resource: cannot tell which resource a Widget"):
        request_from("CREATE", widget, None)
    widgets = GroupVersionResource(group="example.com", version="v1", resource="widgets")
    request = request_from("CREATE", widget, None, resource=widgets)
    assert request.resource == "widgets" and request.obj is None


def test_no_object_and_no_kind_is_an_error() -> None:
    with pytest.raises(RequestError, match="object: Required value"):
        request_from("DELETE", None, None)
