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
from typing import Any

from pydantic import ValidationError

from policies.api.admission import API_VERSION, KIND, AdmissionRequest
from policies.api.kinds import under, validation_problems
from policies.rules.engine import Decision, Request
from policies.rules.request import UndecodableObject, request_from
from webhook import bodies

# kube-apiserver refuses request bodies over 3 MiB (MaxRequestBodyBytes in
# staging/src/k8s.io/apiserver/pkg/server/config.go), and a review carries at most the object and
# its old version; nothing the API server sends is larger.
MAX_BODY_BYTES = 3 * 1024 * 1024


class BadReview(ValueError):
    """The body is not an AdmissionReview draguard can answer (HTTP 400); the message names the field."""


def parse(body: bytes) -> AdmissionRequest:
    """The ``request`` of an ``admission.k8s.io/v1`` AdmissionReview; raises :class:`BadReview`, or
    :class:`webhook.bodies.BadBody` for a body that is not a JSON object."""
    data = bodies.parse_object(body, f"an {API_VERSION} {KIND}")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise BadReview(
            f"apiVersion/kind: got {data.get('apiVersion')!r}/{data.get('kind')!r}: expected {API_VERSION} "
            f"{KIND} (set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    if data.get("request") is None:
        raise BadReview("request: Required value: an AdmissionReview sent to a webhook carries a request")
    try:
        # The request alone: a webhook is never sent the review's response, and the wrapper model
        # cost a tenth of the decode.
        request = AdmissionRequest.model_validate(data["request"])
    except ValidationError as err:
        raise BadReview("; ".join(under("request", p) for p in validation_problems(err))) from None
    if not request.uid:
        raise BadReview("request.uid: Required value")
    return request


def to_request(req: AdmissionRequest) -> Request:
    """The rule engine's view of ``req``, built by :func:`policies.rules.request.request_from` as the
    policy test CLI and the audit build theirs, so a rule answers a review as it answers a test.

    Raises :class:`policies.rules.request.UndecodableObject`.
    """
    return request_from(
        req.operation,
        req.object,
        req.old_object,
        kind=req.kind,
        resource=req.resource,
        sub_resource=req.sub_resource or "",
        namespace=req.namespace or "",
        name=req.name or None,
        user=req.user_info,
        uid=req.uid,
        dry_run=bool(req.dry_run),
    )


def _review(response: dict[str, Any]) -> dict[str, Any]:
    # Built as plain JSON rather than through the AdmissionResponse model: the answer is a few
    # fixed keys, and dumping two models costs more than deciding a typical request.
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def _failure(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1.Status as ``response.status`` carries it."""
    return {"code": code, "reason": reason, "message": message, "status": "Failure"}


def answer(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview that carries ``decision``: a 403 status when denied (429 when the refusal
    lifts by itself, which the API server passes on to the client as it does a
    PodDisruptionBudget's), a base64 JSONPatch when it patches, warnings either way."""
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        code, reason = (429, "TooManyRequests") if decision.retry_later else (403, "Forbidden")
        response["status"] = _failure(code, reason, decision.message)
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.patch:
        response["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
        response["patchType"] = "JSONPatch"
    return _review(response)


def undecodable(uid: str, kind: str, err: UndecodableObject) -> dict[str, Any]:
    """The denial of an object that is not a valid ``kind``: 422 Invalid, as the API server answers
    a field error, and the message lists the fields."""
    message = f"draguard cannot read this {kind}: {err}"
    return _review({"uid": uid, "allowed": False, "status": _failure(422, "Invalid", message)})
