"""The Priority admission plugin: a pod's priority and preemption policy as the API server sets them.

A pod is written with ``priorityClassName`` (or none); only this plugin, when the pod is created,
turns that into ``spec.priority`` and ``spec.preemptionPolicy``, which the scheduler reads. Offline
input holds pods as written, so every command resolves them here before anything is scheduled or
judged, the way upstream ``plugin/pkg/admission/priority/admission.go`` (``admitPod``,
``getDefaultPriorityClass``, ``validatePriorityClass``) does:

* the class the pod names; without one the ``globalDefault`` class (the lowest value among several,
  which only a race can leave), which the pod then names; without that, priority 0 and
  ``PreemptLowerPriority`` and no name;
* the class's ``preemptionPolicy`` becomes the pod's;
* a pod naming a class that does not exist, or setting ``spec.priority`` or
  ``spec.preemptionPolicy`` other than the class gives, is refused (Forbidden), before the pod's
  own validation runs; the wording is the server's (checked against kube-apiserver 1.36.2);
* a second ``globalDefault`` class is refused.

``system-node-critical`` and ``system-cluster-critical`` exist in every cluster (the API server
creates them), so they resolve even when no document holds them. A pod the API server already
stored (:func:`already_admitted`: a ``kubectl get -o yaml`` dump, a pod read from the cluster) was
admitted against the classes of its day, which may since have changed (a default class added, a
class deleted): it keeps what it was given, and is not refused again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from policies.api.base import TypedObject
from policies.api.core import PREEMPT_LOWER_PRIORITY, Pod
from policies.api.scheduling import NO_DEFAULT_PRIORITY, SYSTEM_CLASSES, PriorityClass


def forbidden(resource: str, name: str, why: str) -> str:
    """An admission plugin's refusal as the API server words it (``apierrors.NewForbidden``)."""
    return f'{resource} "{name}" is forbidden: {why}'


class PriorityRefused(ValueError):
    """The plugin refuses the pod: ``str()`` is the API server's whole answer, ``reason`` the
    plugin's own words (what the pods of a workload's template would be refused for)."""

    def __init__(self, pod: Pod, reason: str) -> None:
        # Admission runs before a generateName is filled in: the server names the pod by its prefix.
        super().__init__(forbidden("pods", pod.metadata.name or pod.metadata.generate_name or "", reason))
        self.reason = reason


def already_admitted(pod: Pod) -> bool:
    """Whether the API server stored ``pod`` (it has a creation time) with the priority it gave it."""
    return pod.spec.priority is not None and bool(pod.metadata.creation_timestamp)


def _not_computed(what: str, given: object, computed: object) -> str:
    return (
        f"the {what} ({given}) must not be provided in pod spec; priority admission controller computed "
        f"{computed} from the given PriorityClass name"
    )


@dataclass(frozen=True)
class Resolved:
    """What admission gives a pod: the class it then names ("" for none), its priority and policy."""

    class_name: str
    priority: int
    preemption_policy: str

    @classmethod
    def of(cls, pc: PriorityClass) -> Resolved:
        # A class is stored with its policy defaulted (pkg/apis/scheduling/v1/defaults.go); a
        # document may leave it out.
        return cls(pc.name, pc.value, pc.preemption_policy or PREEMPT_LOWER_PRIORITY)


@dataclass(frozen=True)
class Priorities:
    """The cluster's PriorityClasses by name (the system ones included), in the order they were
    created (read)."""

    classes: Mapping[str, PriorityClass]

    @classmethod
    def of(cls, classes: Iterable[PriorityClass]) -> Priorities:
        """The classes a cluster holds (``classes`` plus the system classes, which the API server
        creates before any other)."""
        known = {c.name: c for c in SYSTEM_CLASSES}
        known.update((c.name, c) for c in classes)
        return cls(MappingProxyType(known))

    @classmethod
    def among(cls, objects: Iterable[TypedObject]) -> Priorities:
        """The classes a cluster holds after creating the PriorityClasses among ``objects`` in
        order: a ``globalDefault`` class after the first is refused (:meth:`class_refusal`), so
        it is not among them."""
        classes = [o for o in objects if isinstance(o, PriorityClass)]
        first = next((c.name for c in classes if c.global_default), None)
        return cls.of(c for c in classes if not c.global_default or c.name == first)

    @cached_property
    def default(self) -> PriorityClass | None:
        """upstream getDefaultPriorityClass: the ``globalDefault`` class of the lowest value."""
        found = None
        for pc in self.classes.values():
            if pc.global_default and (found is None or pc.value < found.value):
                found = pc
        return found

    def resolve(self, pod: Pod) -> Resolved:
        """The class, priority and policy admission gives ``pod``; raises PriorityRefused."""
        name = pod.spec.priority_class_name
        if not name:
            pc = self.default
            if pc is None:
                return Resolved("", NO_DEFAULT_PRIORITY, PREEMPT_LOWER_PRIORITY)
            return Resolved.of(pc)
        pc = self.classes.get(name)
        if pc is None:
            raise PriorityRefused(pod, f"no PriorityClass with name {name} was found ({self._known()})")
        return Resolved.of(pc)

    def _known(self) -> str:
        """What a refusal of an unknown class adds to the server's words: the classes there are."""
        return f"the PriorityClasses are {', '.join(sorted(self.classes))}"

    def admit(self, pod: Pod) -> Pod:
        """``pod`` as the plugin leaves it on create; raises PriorityRefused in the server's words."""
        resolved = self.resolve(pod)
        spec = pod.spec
        if spec.priority is not None and spec.priority != resolved.priority:
            raise PriorityRefused(
                pod, _not_computed("integer value of priority", spec.priority, resolved.priority)
            )
        policy = resolved.preemption_policy
        if spec.preemption_policy is not None and spec.preemption_policy != policy:
            given = spec.preemption_policy
            raise PriorityRefused(pod, _not_computed("string value of PreemptionPolicy", given, policy))
        update: dict[str, object] = {"priority": resolved.priority, "preemption_policy": policy}
        if resolved.class_name and not spec.priority_class_name:
            update["priority_class_name"] = resolved.class_name
        return pod.model_copy(update={"spec": spec.model_copy(update=update)})

    def refusal(self, pod: Pod) -> str | None:
        """Why the plugin refuses to create ``pod`` (None, too, for a pod it admitted already)."""
        try:
            self.stored(pod)
        except PriorityRefused as err:
            return str(err)
        return None

    def stored(self, pod: Pod) -> Pod:
        """``pod`` as the cluster holds it: admitted now unless it was already."""
        return pod if already_admitted(pod) else self.admit(pod)

    def store(self, objects: Iterable[TypedObject]) -> tuple[list[TypedObject], list[str]]:
        """``objects`` with each pod as the cluster stores it (:meth:`stored`), and the refusals
        of the pods left out."""
        kept: list[TypedObject] = []
        refused: list[str] = []
        for obj in objects:
            try:
                kept.append(self.stored(obj) if isinstance(obj, Pod) else obj)
            except PriorityRefused as err:
                refused.append(str(err))
        return kept, refused

    def class_refusal(self, pc: PriorityClass) -> str | None:
        """upstream validatePriorityClass: a ``globalDefault`` class while another one already is
        the default. ``self`` holds the classes in the order they are created (the stored ones
        first), ``pc`` among them."""
        if not pc.global_default:
            return None
        first = next((c for c in self.classes.values() if c.global_default), None)
        if first is None or first.name == pc.name:
            return None
        why = f"PriorityClass {first.name} is already marked as default. Only one default can exist"
        return forbidden("priorityclasses.scheduling.k8s.io", pc.name, why)


def admitted(objects: Sequence[TypedObject]) -> tuple[list[TypedObject], list[str]]:
    """:meth:`Priorities.store` of ``objects`` among their own PriorityClasses, created in order."""
    return Priorities.among(objects).store(objects)
