"""Rule ``personas``: who may write the objects that decide which devices exist and who gets them.

* DeviceClasses: admins only (a class decides which devices a request can reach).
* ResourceSlices: admins, and each DRA driver's own identities for its own driver's slices
  (``spec.driver``; on DELETE the old object's). A node identity (``system:node:<name>`` in group
  ``system:nodes``) may create and update slices of its own node (``spec.nodeName``) for drivers that
  allow it (``nodes: true``) and may delete any slice of its own node: the kubelet wipes its node's
  slices when it starts and when a driver goes away (upstream
  ``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go``). The ``sliceCleaners`` (the garbage
  collector, which removes the slices of a deleted Node) may delete any slice.
* The ``resource.kubernetes.io/admin-access`` label of a Namespace: admins only. It lets claims in
  that namespace ask for admin access, which reaches devices already allocated to other claims and
  so bypasses device isolation (dra-reference 2 and 4.13; Kubernetes issue 141293).

The config decides who is who; the API server's RBAC still applies on top. The default mode is
``warn``: on a cluster whose drivers draguard has not been told about, every driver write would
otherwise be refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.api.admission import UserInfo
from policies.api.base import TypedObject
from policies.api.core import Namespace
from policies.api.resource import ResourceSlice
from policies.config import DriverIdentity, PersonasConfig
from policies.rules.common import object_key
from policies.rules.engine import Context, Finding, Request, RuleUnavailable

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
_WRITES = ("CREATE", "UPDATE", "DELETE")
_RESOURCES = {("resource.k8s.io", "deviceclasses"), ("resource.k8s.io", "resourceslices")}


def admin_label(ns: TypedObject | None) -> str | None:
    """The namespace's admin-access label value; None when absent (or no namespace)."""
    return (ns.metadata.labels or {}).get(ADMIN_ACCESS_LABEL) if isinstance(ns, Namespace) else None


def _label_changes(request: Request) -> bool:
    """CREATE with the label (any value), or UPDATE that adds, removes or changes it."""
    if request.operation == "CREATE":
        return admin_label(request.obj) is not None
    return request.operation == "UPDATE" and admin_label(request.obj) != admin_label(request.old)


def _node_of(user: UserInfo) -> str | None:
    """The node a kubelet's identity belongs to, as the Node authorizer recognises it."""
    name = user.username or ""
    if name.startswith(NODE_USER_PREFIX) and NODES_GROUP in (user.groups or ()):
        return name.removeprefix(NODE_USER_PREFIX)
    return None


class PersonasRule:
    """Deny DeviceClass/ResourceSlice writes and admin-access label changes by the wrong people."""

    name = "personas"
    mutating = False

    def applies(self, request: Request, ctx: Context) -> bool:
        if request.sub_resource:
            return False
        if (request.group, request.resource) in _RESOURCES:
            return request.operation in _WRITES
        return request.group == "" and request.resource == "namespaces" and _label_changes(request)

    def costly(self, request: Request, ctx: Context) -> bool:
        return False  # reads the request and the config

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        settings = ctx.config.rules.personas
        user = request.user.username or "(anonymous)"
        if settings.admins.include(user, request.user.groups or ()):
            return []
        admins = f"admins ({settings.admins.describe()})"
        verb = request.operation.lower()
        if request.resource == "namespaces":
            return [Finding("deny", (
                f"user {user} may not {verb} Namespace {request.name} with a changed {ADMIN_ACCESS_LABEL} "
                f"label: only {admins} may change it, because admin access to devices bypasses device "
                "isolation (claims in that namespace can use devices allocated to others)"
            ))]
        if request.resource == "deviceclasses":
            shown = request.obj or request.old
            name = object_key(shown) if shown is not None else request.name
            return [Finding("deny", f"user {user} may not {verb} DeviceClass {name}: only {admins} may")]
        return _slice_findings(request, user, settings, admins)


def _slice_findings(request: Request, user: str, settings: PersonasConfig, admins: str) -> list[Finding]:
    slices = [s for s in (request.obj, request.old) if isinstance(s, ResourceSlice)]
    if not slices:
        raise RuleUnavailable(f"ResourceSlice {request.name}: the object could not be decoded")
    drivers = sorted({s.spec.driver for s in slices})
    configured = {d.driver: d for d in settings.drivers}
    identities = [configured[d] for d in drivers if d in configured]
    known = len(identities) == len(drivers)
    if known and all(user in i.usernames() for i in identities):
        return []
    node = _node_of(request.user)
    node_may = request.operation == "DELETE" or (known and all(i.nodes for i in identities))
    if node is not None and node_may and all(s.spec.node_name == node for s in slices):
        return []
    if request.operation == "DELETE" and settings.slice_cleaners.include(user, request.user.groups or ()):
        return []
    shown = slices[0]
    where = f"driver {', '.join(drivers)}"
    if shown.spec.node_name:
        where += f", node {shown.spec.node_name}"
    return [Finding("deny", (
        f"user {user} may not {request.operation.lower()} ResourceSlice {object_key(shown)} ({where}): "
        + "; ".join(_writers(d, configured.get(d), admins) for d in drivers)
    ))]


def _writers(driver: str, identity: DriverIdentity | None, admins: str) -> str:
    """Who may write slices of ``driver``, for the message."""
    if identity is None:
        return f"driver {driver} is not in rules.personas.drivers, so only {admins} may write its slices"
    who = [admins]
    if identity.usernames():
        who.append(f"the driver's identities ({', '.join(sorted(identity.usernames()))})")
    if identity.nodes:
        who.append("the kubelet of the slice's node")
    return f"slices of driver {driver} may be written by " + ", ".join(who)
