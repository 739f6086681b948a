"""The core/v1 pieces DRA objects embed, and the DRA parts of a Pod.

Node selectors (``corevalidation.ValidateNodeSelector``), metav1 conditions
(``metav1validation.ValidateConditions``) and CIDR-form interface addresses
(``validation.IsValidInterfaceAddress``) appear inside ResourceSlices and claim status; the pod
checks are the ``resourceClaims`` / ``resources.claims`` rules of ``pkg/apis/core/validation``.
"""

from __future__ import annotations

import re

from policies.api.base import Condition, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from policies.api.core import PREEMPTION_POLICIES, Container, ContainerResourceClaim, Pod, PodResourceClaim
from policies.validation import gosyntax
from policies.validation.fielderrors import (
    ErrorList,
    FieldError,
    Path,
    duplicate,
    forbidden,
    go_quote,
    invalid,
    not_found,
    not_supported,
    required,
    too_long,
)
from policies.validation.ipaddr import canonical_interface_address
from policies.validation.names import (
    is_dns1123_subdomain,
    is_label_value,
    regex_error,
    validate_dns_label,
    validate_label_name,
)

# --- node selectors -----------------------------------------------------------------------------------

_OPS_WITH_VALUES = ("In", "NotIn")
_OPS_WITHOUT_VALUES = ("Exists", "DoesNotExist")
_OPS_SINGLE_VALUE = ("Gt", "Lt")


def _validate_requirement(req: NodeSelectorRequirement, path: Path, check_values: bool) -> ErrorList:
    errs: ErrorList = []
    values = req.values or []
    if req.operator in _OPS_WITH_VALUES:
        if not values:
            errs.append(
                required(path.child("values"), "must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif req.operator in _OPS_WITHOUT_VALUES:
        if values:
            errs.append(
                forbidden(
                    path.child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
    elif req.operator in _OPS_SINGLE_VALUE:
        if len(values) != 1:
            errs.append(
                required(
                    path.child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            )
    else:
        errs.append(invalid(path.child("operator"), req.operator, "not a valid selector operator"))
    errs += validate_label_name(req.key, path.child("key"))
    for i, value in enumerate(values if check_values else []):
        errs += [invalid(path.child("values").index(i), value, msg) for msg in is_label_value(value)]
    return errs


def _validate_field_requirement(req: NodeSelectorRequirement, path: Path) -> ErrorList:
    """``matchFields``: only ``metadata.name``, with exactly one value."""
    errs: ErrorList = []
    values = req.values or []
    if req.operator in _OPS_WITH_VALUES:
        if len(values) != 1:
            errs.append(
                required(
                    path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )
            )
    else:
        errs.append(invalid(path.child("operator"), req.operator, "not a valid selector operator"))
    if req.key != "metadata.name":
        errs.append(invalid(path.child("key"), req.key, "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            errs += [
                invalid(path.child("values").index(i), value, msg) for msg in is_dns1123_subdomain(value)
            ]
    return errs


def validate_node_selector_term(
    term: NodeSelectorTerm, path: Path, *, check_values: bool = True
) -> ErrorList:
    """``check_values=False``: any label value (preferred scheduling terms allow them)."""
    errs: ErrorList = []
    for j, req in enumerate(term.match_expressions or []):
        errs += _validate_requirement(req, path.child("matchExpressions").index(j), check_values)
    for j, req in enumerate(term.match_fields or []):
        errs += _validate_field_requirement(req, path.child("matchFields").index(j))
    return errs


def validate_node_selector(selector: NodeSelector, path: Path) -> ErrorList:
    terms_path = path.child("nodeSelectorTerms")
    if not selector.node_selector_terms:
        return [required(terms_path, "must have at least one node selector term")]
    errs: ErrorList = []
    for i, term in enumerate(selector.node_selector_terms):
        errs += validate_node_selector_term(term, terms_path.index(i))
    return errs


# --- metav1.Condition -----------------------------------------------------------------------------------

_CONDITION_STATUSES = ("False", "True", "Unknown")
_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON = re.compile(_REASON_FMT, re.ASCII)
_REASON_MSG = (
    "a condition reason must start with alphabetic character, optionally followed by a string of "
    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'"
)
MAX_REASON_LEN = 1024
MAX_MESSAGE_LEN = 32 * 1024


def _validate_condition(cond: Condition, path: Path) -> ErrorList:
    errs = validate_label_name(cond.type, path.child("type"))
    if cond.status not in _CONDITION_STATUSES:
        errs.append(not_supported(path.child("status"), cond.status, _CONDITION_STATUSES))
    if cond.observed_generation is not None and cond.observed_generation < 0:
        errs.append(
            invalid(
                path.child("observedGeneration"),
                cond.observed_generation,
                "must be greater than or equal to zero",
            )
        )
    if not cond.last_transition_time:
        errs.append(required(path.child("lastTransitionTime"), "must be set"))
    if not cond.reason:
        errs.append(required(path.child("reason"), "must be set"))
    else:
        if not _REASON.fullmatch(cond.reason):
            errs.append(
                invalid(
                    path.child("reason"),
                    cond.reason,
                    regex_error(
                        _REASON_MSG,
                        _REASON_FMT,
                        "my_name",
                        "MY_NAME",
                        "MyName",
                        "ReasonA,ReasonB",
                        "ReasonA:ReasonB",
                    ),
                )
            )
        if len(cond.reason.encode()) > MAX_REASON_LEN:
            errs.append(too_long(path.child("reason"), MAX_REASON_LEN))
    if cond.message is not None and len(cond.message.encode()) > MAX_MESSAGE_LEN:
        errs.append(too_long(path.child("message"), MAX_MESSAGE_LEN))
    return errs


def validate_conditions(conditions: list[Condition] | None, path: Path) -> ErrorList:
    errs: ErrorList = []
    seen: set[str] = set()
    for i, cond in enumerate(conditions or []):
        if cond.type in seen:
            errs.append(duplicate(path.index(i).child("type"), cond.type))
        seen.add(cond.type)
        errs += _validate_condition(cond, path.index(i))
    return errs


# --- network addresses ------------------------------------------------------------------------------------


def validate_interface_address(value: str, path: Path) -> ErrorList:
    """An address with its prefix length (``192.0.2.5/24``), in canonical form."""
    canonical = canonical_interface_address(value)
    if canonical is None:
        return [
            invalid(path, value, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)")
        ]
    if value != canonical:
        return [invalid(path, value, f"must be in canonical form ({go_quote(canonical)})")]
    return []


# --- Pod: spec.resourceClaims and the containers' resources.claims ---------------------------------------


def _validate_pod_claim(pod: Pod, claim: PodResourceClaim, seen: set[str], path: Path) -> ErrorList:
    errs: ErrorList = []
    if not claim.name:
        errs.append(required(path.child("name")))
    elif claim.name in seen:
        errs.append(duplicate(path.child("name"), claim.name))
    else:
        name_errs = validate_dns_label(claim.name, path.child("name"))
        errs += name_errs
        if not name_errs and claim.resource_claim_template_name is not None and pod.name:
            generated = f"{pod.name}-{claim.name}"
            errs += [
                invalid(path.child("name"), generated, "final ResourceClaim name: " + msg)
                for msg in is_dns1123_subdomain(generated)
            ]
        seen.add(claim.name)
    shown = gosyntax.GoSyntax(
        gosyntax.struct(
            "core.PodResourceClaim",
            [
                ("Name", go_quote(claim.name)),
                ("ResourceClaimName", gosyntax.pointer("string", claim.resource_claim_name is not None)),
                (
                    "ResourceClaimTemplateName",
                    gosyntax.pointer("string", claim.resource_claim_template_name is not None),
                ),
            ],
        )
    )
    if claim.resource_claim_name is not None and claim.resource_claim_template_name is not None:
        errs.append(
            invalid(
                path,
                shown,
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            )
        )
    if claim.resource_claim_name is None and claim.resource_claim_template_name is None:
        errs.append(
            invalid(path, shown, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        )
    for field_name, value in (
        ("resourceClaimName", claim.resource_claim_name),
        ("resourceClaimTemplateName", claim.resource_claim_template_name),
    ):
        if value is not None:
            errs += [invalid(path.child(field_name), value, msg) for msg in is_dns1123_subdomain(value)]
    return errs


def _unknown_claim(path: Path, name: str, pod_claims: set[str]) -> FieldError:
    err = not_found(path, name)
    listed = ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty"
    return FieldError(
        err.type, err.field, err.bad_value, "must be one of the names in pod.spec.resourceClaims" + listed
    )


def _validate_container_claims(
    claims: list[ContainerResourceClaim], pod_claims: set[str], path: Path
) -> ErrorList:
    errs: ErrorList = []
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        if not claim.name:
            errs.append(required(path.index(i)))
            continue
        key = claim.name
        if claim.request:
            errs += validate_dns_label(claim.request, path.index(i).child("request"))
            key += "/" + claim.request
        if key in seen:
            errs.append(duplicate(path.index(i), key))
        seen.add(key)
        if claim.name not in pod_claims:
            errs.append(_unknown_claim(path.index(i), claim.name, pod_claims))
    return errs


def _containers(pod: Pod) -> list[tuple[Path, Container]]:
    spec = Path("spec")
    found = [(spec.child("initContainers").index(i), c) for i, c in enumerate(pod.spec.init_containers or [])]
    found += [(spec.child("containers").index(i), c) for i, c in enumerate(pod.spec.containers)]
    return found


def validate_pod_claims(pod: Pod) -> ErrorList:
    """The DRA parts of a pod: its claim list, the containers' references, pod-level claims, status."""
    errs: ErrorList = []
    seen: set[str] = set()
    for i, claim in enumerate(pod.spec.resource_claims or []):
        errs += _validate_pod_claim(pod, claim, seen, Path("spec", "resourceClaims").index(i))
    pod_claims = {c.name for c in pod.spec.resource_claims or [] if c.name}
    for path, container in _containers(pod):
        if container.resources is not None and container.resources.claims:
            errs += _validate_container_claims(
                container.resources.claims, pod_claims, path.child("resources", "claims")
            )
    if pod.spec.resources is not None and pod.spec.resources.claims:
        errs.append(
            forbidden(Path("spec", "resources", "claims"), "claims may not be specified at the pod level")
        )
    errs += _validate_claim_statuses(pod, pod_claims)
    return errs


def _validate_claim_statuses(pod: Pod, pod_claims: set[str]) -> ErrorList:
    errs: ErrorList = []
    seen: set[str] = set()
    statuses = pod.status.resource_claim_statuses if pod.status is not None else None
    for i, status in enumerate(statuses or []):
        path = Path("status", "resourceClaimStatuses").index(i)
        if status.name not in pod_claims:
            errs.append(
                invalid(
                    path.child("name"),
                    status.name,
                    "must match the name of an entry in `spec.resourceClaims`",
                )
            )
        if status.name in seen:
            errs.append(duplicate(path.child("name"), status.name))
        seen.add(status.name)
        if status.resource_claim_name is not None:
            errs += [
                invalid(path.child("name"), status.resource_claim_name, msg)
                for msg in is_dns1123_subdomain(status.resource_claim_name)
            ]
    return errs


# --- Pod: privileged containers -------------------------------------------------------------------


def refuse_privileged(pod: Pod) -> ErrorList:
    """What an API server running without ``--allow-privileged`` (kube-apiserver's default; kubeadm
    and most distributions set it) says about privileged containers (``ValidateSecurityContext``)."""
    return [
        forbidden(path.child("securityContext", "privileged"), "disallowed by cluster policy")
        for path, container in _containers(pod)
        if container.security_context is not None and container.security_context.privileged
    ]


def validate_preemption_policy(policy: str | None, path: Path) -> ErrorList:
    """``ValidatePreemptionPolicy``: a pod's or a PriorityClass's (None: not set)."""
    if policy is None or policy in PREEMPTION_POLICIES:
        return []
    if policy == "":
        return [required(path)]
    return [not_supported(path, policy, PREEMPTION_POLICIES)]
