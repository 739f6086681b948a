"""The answers ``webhook.review`` builds are AdmissionReviews the API server reads as meant.

They are built as plain JSON for speed, so these tests hold them against the API model: every key
must be a field the model knows (the models keep unknown keys, so that is checked explicitly), and
the values must survive a strict parse unchanged.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from policies.api.admission import AdmissionReview
from policies.rules.engine import Decision
from policies.rules.request import UndecodableObject
from webhook.review import answer, undecodable

PATCH = ({"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "node-1"}},)


def strictly_modelled(body: dict[str, Any]) -> AdmissionReview:
    review = AdmissionReview.model_validate(body)
    assert review.to_json() == body
    assert review.response is not None
    for model in (review, review.response, review.response.status):
        assert model is None or not model.model_extra, model.model_extra
    return review


@pytest.mark.parametrize(
    "decision",
    [
        Decision(True),
        Decision(True, warnings=("selector matches no device",)),
        Decision(False, "claim c is not allocated", warnings=("w",)),
        Decision(False, "driver pod must not be evicted yet", retry_later=True),
        Decision(True, patch=PATCH),
    ],
)
def test_answers_are_admission_reviews_with_known_fields_only(decision: Decision) -> None:
    review = strictly_modelled(answer("uid-7", decision))
    response = review.response
    assert response is not None
    assert (review.api_version, review.kind) == ("admission.k8s.io/v1", "AdmissionReview")
    assert (response.uid, response.allowed) == ("uid-7", decision.allowed)
    assert (response.warnings or []) == list(decision.warnings)
    if decision.allowed:
        assert response.status is None
    else:
        assert response.status is not None
        expected = (429, "TooManyRequests") if decision.retry_later else (403, "Forbidden")
        assert (response.status.code, response.status.reason) == expected
        assert response.status.message == decision.message
    if decision.patch:
        assert response.patch_type == "JSONPatch"
        assert json.loads(base64.b64decode(response.patch or "")) == list(PATCH)
    else:
        assert response.patch is None and response.patch_type is None


def test_an_undecodable_object_is_a_422_naming_the_field() -> None:
    err = UndecodableObject(("object.spec.resourceClaims: Invalid value: must be a list",))
    response = strictly_modelled(undecodable("u", "Pod", err)).response
    assert response is not None and response.status is not None
    assert (response.allowed, response.status.code, response.status.reason) == (False, 422, "Invalid")
    assert response.status.message == (
        "draguard cannot read this Pod: object.spec.resourceClaims: Invalid value: must be a list"
    )
