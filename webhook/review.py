"""From an AdmissionReview body to a rule ``Request``, and from a ``Decision`` back to a review.

Two kinds of errors are kept apart, as kopf does: an error of the *webhook call* (a body that is
not JSON, not an ``admission.k8s.io/v1`` AdmissionReview, or has no ``request.uid``) can only be
answered with HTTP 400, since there is no uid to answer; an error of the *admitted object* (a Pod
whose ``spec.resourceClaims`` is a string, a ResourceClaim sent for the ``pods`` resource) is a
well-formed question with the answer "denied", and the message names the field.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from policies.api.admission import (
    API_VERSION,
    KIND,
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    Status,
)
from policies.api.base import TypedObject
from policies.api.kinds import KINDS, DecodeError, decode, validation_problems
from policies.rules.engine import Decision, Request

# kube-apiserver refuses request bodies over 3 MiB (MaxRequestBodyBytes in
# staging/src/k8s.io/apiserver/pkg/server/config.go), and a review carries at most the object and
# its old version; nothing the API server sends is larger.
MAX_BODY_BYTES = 3 * 1024 * 1024


class BadReview(ValueError):
    """The body is not an AdmissionReview draguard can answer (HTTP 400); the message names the field."""


@dataclass(frozen=True)
class UndecodableObject(ValueError):
    """The review is fine but its object is not a valid object of the request's kind."""

    problems: tuple[str, ...]

    def __str__(self) -> str:
        return "; ".join(self.problems)


def parse(body: bytes) -> AdmissionRequest:
    """The ``request`` of an ``admission.k8s.io/v1`` AdmissionReview; raises :class:`BadReview`."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadReview(f"body is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise BadReview("body is not a JSON object: expected an admission.k8s.io/v1 AdmissionReview")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise BadReview(
            f"apiVersion/kind: got {data.get('apiVersion')!r}/{data.get('kind')!r}: expected {API_VERSION} "
            f"{KIND} (set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    if data.get("request") is None:
        raise BadReview("request: Required value: an AdmissionReview sent to a webhook carries a request")
    try:
        review = AdmissionReview.model_validate(data)
    except ValidationError as err:
        raise BadReview("; ".join(validation_problems(err))) from None
    request = review.request
    assert request is not None
    if not request.uid:
        raise BadReview("request.uid: Required value")
    return request


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _decode(raw: Any, api_version: str, kind: str, field: str) -> TypedObject | None:
    """The object as a model of the request's kind; ``None`` when absent (``object`` of a DELETE)."""
    if raw is None:
        return None
    if isinstance(raw, dict) and (raw.get("apiVersion"), raw.get("kind")) != (api_version, kind):
        got = f"{raw.get('apiVersion')} {raw.get('kind')}"
        raise UndecodableObject(
            (
                f"{field}: Invalid value: {got!r}: the request is for {api_version} {kind}; "
                "the webhook configuration's rules and the object disagree",
            )
        )
    try:
        return decode(raw)
    except DecodeError as err:
        raise UndecodableObject(tuple(_at(field, p) for p in err.problems)) from None


def _at(field: str, problem: str) -> str:
    """A decode problem (``spec.x: ...``, ``<root>: ...``) as a path inside the review (``object.spec.x``)."""
    if problem.startswith("<root>"):
        return field + problem.removeprefix("<root>")
    return f"{field}.{problem}"


def to_request(req: AdmissionRequest) -> Request:
    """The rule engine's view of ``req``; raises :class:`UndecodableObject`.

    Objects of a kind draguard models are decoded (a Pod, a ResourceClaim...); others (an
    Eviction) are passed raw.
    """
    api_version, kind = _api_version(req.kind.group, req.kind.version), req.kind.kind
    modelled = (api_version, kind) in KINDS
    obj = _decode(req.object, api_version, kind, "object") if modelled else None
    old = _decode(req.old_object, api_version, kind, "oldObject") if modelled else None
    name = req.name or (obj.name if obj is not None else "")
    return Request(
        uid=req.uid,
        operation=req.operation,
        group=req.kind.group,
        version=req.kind.version,
        kind=kind,
        resource=req.resource.resource,
        sub_resource=req.sub_resource or "",
        namespace=req.namespace or "",
        name=name,
        user=req.user_info,
        obj=obj,
        old=old,
        raw=req.object if isinstance(req.object, dict) else None,
        raw_old=req.old_object if isinstance(req.old_object, dict) else None,
        dry_run=bool(req.dry_run),
    )


def _review(response: AdmissionResponse) -> dict[str, Any]:
    # Set explicitly: the models dump only the fields that were set, and the API server needs both.
    return AdmissionReview(api_version=API_VERSION, kind=KIND, response=response).to_json()


def answer(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview that carries ``decision``: a 403 status when denied, a base64 JSONPatch
    when it patches, warnings either way."""
    fields: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        fields["status"] = Status(code=403, reason="Forbidden", message=decision.message, status="Failure")
    if decision.warnings:
        fields["warnings"] = list(decision.warnings)
    if decision.patch:
        fields["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
        fields["patch_type"] = "JSONPatch"
    return _review(AdmissionResponse(**fields))


def undecodable(uid: str, kind: str, err: UndecodableObject) -> dict[str, Any]:
    """The denial of an object that is not a valid ``kind``: 422 Invalid, as the API server answers
    a field error, and the message lists the fields."""
    message = f"draguard cannot read this {kind}: {err}"
    status = Status(code=422, reason="Invalid", message=message, status="Failure")
    return _review(AdmissionResponse(uid=uid, allowed=False, status=status))
