"""The documents draguard gives programs, versioned as Kubernetes objects are.

Every ``-o json`` / ``-o yaml`` document of ``validate``, ``allocate``, ``audit``, ``test``,
``devices`` and ``headroom``, and the dry-run endpoint's answers, carry ``apiVersion:
draguard.io/v1alpha1`` and a ``kind``, so that a script or a dashboard can tell which shape it reads
instead of breaking silently when one changes (``allocate -o json`` changed shape with issue 17
with nothing in it saying so). The shapes are pydantic models: these, the dry run's
(:mod:`policies.dryrun.answer`), the device counts' (:mod:`policies.availability.answer`) and the
headroom's (:mod:`policies.dryrun.headroom_answer`). Their JSON Schemas are generated from them and
published in the repository's ``schemas/`` directory (:mod:`webhook.schemas`); a change of shape
is a new version, stated in ``CHANGELOG.md``.

Pure data: the commands fill them in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Version = Literal["draguard.io/v1alpha1"]
API_VERSION: Version = "draguard.io/v1alpha1"


class OutputModel(BaseModel):
    """camelCase keys, nothing unknown, frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """camelCase keys; optional fields that do not apply are left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json`'s document as JSON, encoded by pydantic-core in one pass (a tenth of the
        time of building the dicts and ``json.dumps``)."""
        return self.__pydantic_serializer__.to_json(self, by_alias=True, exclude_none=True)


# --- validate -------------------------------------------------------------------------------------


class ValidatedObject(OutputModel):
    source: str = Field(description="file: document N[, items[i]]")
    kind: str
    name: str = Field(description="namespace/name, or the name")
    checked: Literal["object", "metadata"] = Field(
        description="the whole object, or only its metadata (a kind draguard does not otherwise check)"
    )
    valid: bool
    problems: list[str] = Field(
        description="what the API server would refuse, one line each as kubectl prints it"
    )
    warnings: list[str] = Field(
        description="what it would not refuse: selector warnings, the same object in another document, "
        "what a refused selector means for an object already stored"
    )


class ValidateSummary(OutputModel):
    objects: int = Field(ge=0)
    valid: int = Field(ge=0)
    invalid: int = Field(ge=0)
    problems: int = Field(ge=0)
    warnings: int = Field(ge=0)
    unreadable: int = Field(ge=0, description="files (or documents) that could not be read at all")


class ValidateReport(OutputModel):
    """``draguard validate -o json|yaml``."""

    api_version: Version = API_VERSION
    kind: Literal["ValidateReport"] = "ValidateReport"
    objects: list[ValidatedObject]
    unreadable: list[str] = Field(description="why each unreadable file could not be read")
    summary: ValidateSummary


# --- audit ----------------------------------------------------------------------------------------

AuditResult = Literal["fail", "warn", "error", "pass", "skip"]


class AuditResource(OutputModel):
    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None


class AuditFinding(OutputModel):
    category: Literal["policy", "health"]
    rule: str = Field(description="a rule's name (policy) or a health check's")
    result: AuditResult
    message: str
    resources: list[AuditResource] = Field(description="the first is the object the finding is about")


class AuditSummary(OutputModel):
    fail: int = Field(ge=0)
    warn: int = Field(ge=0)
    error: int = Field(ge=0)
    pass_: int = Field(ge=0, alias="pass")
    skip: int = Field(ge=0)


class AuditReport(OutputModel):
    """``draguard audit -o json|yaml``."""

    api_version: Version = API_VERSION
    kind: Literal["AuditReport"] = "AuditReport"
    objects: int = Field(ge=0, description="objects audited")
    summary: AuditSummary
    findings: list[AuditFinding]


# --- test -----------------------------------------------------------------------------------------


class TestCaseResult(OutputModel):
    __test__ = False  # a model, not a pytest test class

    name: str
    result: Literal["pass", "fail"]
    reason: str
    actual: dict[str, Any] = Field(
        description="what draguard answered: the admission decision (allowed, message, warnings, patch, "
        "outcomes) or the allocation (fits, doesNotFit)"
    )


class TestSuiteResult(OutputModel):
    __test__ = False

    name: str
    file: str
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    tests: list[TestCaseResult]


class TestReport(OutputModel):
    """``draguard test -o json|yaml``."""

    __test__ = False

    api_version: Version = API_VERSION
    kind: Literal["TestReport"] = "TestReport"
    suites: list[TestSuiteResult]
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
