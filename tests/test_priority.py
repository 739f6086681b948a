"""policies.priority: a pod's priority and preemption policy as the Priority admission plugin sets
them, and its refusals (the wording is checked against kube-apiserver in tests/kube)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.kinds import decode
from policies.api.scheduling import PriorityClass
from policies.priority import Priorities, PriorityRefused, admitted

TRAINING = "2026-03-01T08:00:00Z"


def priority_class(name: str, value: int, **fields: Any) -> PriorityClass:
    obj = decode(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            **fields,
        }
    )
    assert isinstance(obj, PriorityClass)
    return obj


def pod(name: str = "train", metadata: dict[str, Any] | None = None, **spec: Any) -> Pod:
    obj = decode(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", **(metadata or {})},
            "spec": {"containers": [{"name": "main", "image": "registry.example.com/train:2"}], **spec},
        }
    )
    assert isinstance(obj, Pod)
    return obj


BATCH = priority_class("batch", 100, preemptionPolicy="PreemptLowerPriority")
INTERACTIVE = priority_class("interactive", 5000, preemptionPolicy="Never")


def resolved(priorities: Priorities, p: Pod) -> tuple[str | None, int | None, str | None]:
    spec = priorities.admit(p).spec
    return spec.priority_class_name, spec.priority, spec.preemption_policy


def test_the_class_named_gives_priority_and_policy() -> None:
    priorities = Priorities.of([BATCH, INTERACTIVE])
    assert resolved(priorities, pod(priorityClassName="interactive")) == ("interactive", 5000, "Never")
    assert resolved(priorities, pod(priorityClassName="batch")) == ("batch", 100, "PreemptLowerPriority")


def test_without_a_class_the_global_default_else_zero() -> None:
    assert resolved(Priorities.of([BATCH]), pod()) == (None, 0, "PreemptLowerPriority")
    cheap = priority_class("cheap", -5, globalDefault=True, preemptionPolicy="Never")
    # The pod then names the default class, as the plugin writes it into the stored pod.
    assert resolved(Priorities.of([BATCH, cheap]), pod()) == ("cheap", -5, "Never")
    # Two defaults (a race the plugin cannot prevent in a cluster): the lowest value wins.
    cheaper = priority_class("cheaper", -9, globalDefault=True, preemptionPolicy="PreemptLowerPriority")
    assert resolved(Priorities.of([cheap, cheaper]), pod()) == ("cheaper", -9, "PreemptLowerPriority")


def test_the_system_classes_need_no_document() -> None:
    priorities = Priorities.of([])
    assert resolved(priorities, pod(priorityClassName="system-node-critical"))[1] == 2_000_001_000
    assert resolved(priorities, pod(priorityClassName="system-cluster-critical"))[1] == 2_000_000_000


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"priorityClassName": "urgent"},
            'pods "train" is forbidden: no PriorityClass with name urgent was found (the PriorityClasses are '
            "batch, interactive, system-cluster-critical, system-node-critical)",
        ),
        (
            {"priorityClassName": "batch", "priority": 7},
            'pods "train" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
            "priority admission controller computed 100 from the given PriorityClass name",
        ),
        (
            {"priority": 7},
            'pods "train" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
            "priority admission controller computed 0 from the given PriorityClass name",
        ),
        (
            {"priorityClassName": "interactive", "preemptionPolicy": "PreemptLowerPriority"},
            'pods "train" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not '
            "be provided in pod spec; priority admission controller computed Never from the given "
            "PriorityClass name",
        ),
    ],
)
def test_refusals_are_the_servers(spec: dict[str, Any], message: str) -> None:
    priorities = Priorities.of([BATCH, INTERACTIVE])
    with pytest.raises(PriorityRefused) as caught:
        priorities.admit(pod(**spec))
    assert str(caught.value) == message
    assert priorities.refusal(pod(**spec)) == message


def test_what_the_plugin_would_compute_anyway_may_be_written() -> None:
    priorities = Priorities.of([INTERACTIVE])
    assert resolved(
        priorities, pod(priorityClassName="interactive", priority=5000, preemptionPolicy="Never")
    ) == ("interactive", 5000, "Never")


def test_a_pod_the_server_stored_is_not_admitted_again() -> None:
    """A dump of a cluster: admitted against the classes of its day (here none was the default,
    and the class it names has since been deleted)."""
    stored = pod(
        metadata={"creationTimestamp": TRAINING},
        priorityClassName="retired",
        priority=0,
        preemptionPolicy="PreemptLowerPriority",
    )
    later = Priorities.of([priority_class("cheap", -5, globalDefault=True)])
    assert later.refusal(stored) is None
    assert later.stored(stored) is stored
    # Without the priority the server gave it, it is a pod to admit like any other.
    written = pod(metadata={"creationTimestamp": TRAINING}, priorityClassName="retired")
    assert later.refusal(written) is not None


def test_a_second_default_is_refused_and_not_among_the_classes() -> None:
    first = priority_class("standard", 0, globalDefault=True)
    second = priority_class("cheap", -5, globalDefault=True)
    priorities = Priorities.among([first, second, BATCH])
    assert priorities.class_refusal(first) is None
    assert priorities.class_refusal(second) == (
        'priorityclasses.scheduling.k8s.io "cheap" is forbidden: PriorityClass standard is already marked as '
        "default. Only one default can exist"
    )
    assert priorities.default == first and "cheap" not in priorities.classes


def test_admitted_resolves_the_pods_of_a_manifest_set_and_says_which_are_refused() -> None:
    objects = [BATCH, pod("a", priorityClassName="batch"), pod("b", priorityClassName="urgent"), pod("c")]
    kept, refused = admitted(objects)
    assert [o.name for o in kept] == ["batch", "a", "c"]
    assert [o.spec.priority for o in kept if isinstance(o, Pod)] == [100, 0]
    assert refused == [
        'pods "b" is forbidden: no PriorityClass with name urgent was found (the PriorityClasses are batch, '
        "system-cluster-critical, system-node-critical)"
    ]
