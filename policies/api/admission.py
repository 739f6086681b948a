"""admission.k8s.io/v1 AdmissionReview: what the API server sends to a webhook and expects back.

``object`` and ``oldObject`` stay raw JSON here: which model they decode into depends on the
request's kind, and the webhook must be able to answer a clear "denied: not a Pod" rather than
fail to parse the whole review.
"""

from __future__ import annotations

from typing import Any, Literal

from policies.api.base import ApiModel

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"


class GroupVersionKind(ApiModel):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(ApiModel):
    group: str = ""
    version: str = ""
    resource: str = ""


class UserInfo(ApiModel):
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class AdmissionRequest(ApiModel):
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str | None = None
    request_kind: GroupVersionKind | None = None
    request_resource: GroupVersionResource | None = None
    request_sub_resource: str | None = None
    name: str | None = None
    namespace: str | None = None
    # The operations admission.k8s.io/v1 defines (Operation in k8s.io/api/admission/v1/types.go).
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    user_info: UserInfo = UserInfo()
    object: Any = None
    old_object: Any = None
    dry_run: bool | None = None
    options: Any = None


class StatusDetails(ApiModel):
    name: str | None = None
    kind: str | None = None


class Status(ApiModel):
    """metav1.Status as carried in ``response.status`` of a denied review."""

    code: int | None = None
    message: str | None = None
    reason: str | None = None
    status: str | None = None


class AdmissionResponse(ApiModel):
    uid: str
    allowed: bool
    status: Status | None = None
    patch: str | None = None
    patch_type: str | None = None
    audit_annotations: dict[str, str] | None = None
    warnings: list[str] | None = None


class AdmissionReview(ApiModel):
    api_version: str = API_VERSION
    kind: str = KIND
    request: AdmissionRequest | None = None
    response: AdmissionResponse | None = None
