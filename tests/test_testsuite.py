"""policies.testsuite: the suite format, preparing a suite, and what each expectation accepts.

Expectation semantics are tested with a stand-in rule whose findings each test chooses, so they do
not depend on what the real rules say; the real rules run in tests/test_cli_test.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from policies.api.base import TypedObject
from policies.api.resource import ResourceClaim
from policies.dryrun import pod_claims
from policies.rules.engine import Context, Finding, Request
from policies.rules.registry import RULES
from policies.testsuite import (
    DEFAULT_USER,
    AdmissionCase,
    AllocationCase,
    CaseResult,
    SuiteError,
    parse_suite,
    prepare,
    run_suite,
)
from webhook.manifests import load

CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "gpu-cluster"
NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@cache
def state() -> tuple[TypedObject, ...]:
    return tuple(x.obj for x in load([str(CLUSTER)]))


def no_files(name: str) -> list[Any]:
    raise SuiteError([f"{name}: no such file or directory"])


def class_object(name: str = "gpu") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}}


def claim_object(name: str, count: int | None = None, model: str = "a100") -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": f'device.attributes["gpu.example.com"].model == "{model}"'}}],
    }
    if count is not None:
        exactly["count"] = count
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def admission(**fields: Any) -> dict[str, Any]:
    return {"name": "t", "operation": "CREATE", "object": class_object(), "expect": "allow", **fields}


def suite(*tests: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": "s", "tests": list(tests), **fields}


def problems(data: dict[str, Any], read: Any = no_files) -> list[str]:
    with pytest.raises(SuiteError) as err:
        prepare(parse_suite(data), state(), read, NOW)
    return err.value.problems


# --- the file format ---------------------------------------------------------------------------


def test_unknown_keys_are_errors_that_name_the_path_and_the_likely_key() -> None:
    misspelled = {"name": "a", "allocate": "p.yaml", "expectNode": []}
    found = problems(suite(admission(messageContain="x"), misspelled, stat=[]))
    assert "tests[0].messageContain: unknown field; did you mean messageContains?" in found
    assert "tests[1].expectNode: unknown field; did you mean expectNodes?" in found
    assert "tests[1].expectNodes: Required value" in found
    assert "stat: unknown field; did you mean state?" in found


def test_wrong_values_name_the_field_and_the_value() -> None:
    assert problems(suite(admission(expect="maybe"))) == [
        "tests[0].expect: Invalid value: 'maybe': Input should be 'allow', 'deny' or 'warn'"
    ]
    assert problems(suite(admission(object=5))) == [
        "tests[0].object: Invalid value: 5: must be a file name (relative to the suite) or an inline object"
    ]
    assert problems(suite({"name": "fit", "allocate": [1], "expectNodes": []})) == [
        "tests[0].allocate: must be a file name (relative to the suite) or an inline object, "
        "or a list of inline objects"
    ]
    assert problems(suite("just a name")) == ["tests[0]: Invalid value: 'just a name': must be a mapping"]
    assert problems(suite(admission(), state="cluster/")) == [
        "state: Invalid value: 'cluster/': must be a list"
    ]


def test_a_suite_needs_tests() -> None:
    assert problems({"name": "s", "tests": []})[0].startswith("tests: ")
    assert problems({"name": "s"}) == ["tests: Required value"]


def test_each_operation_needs_its_objects() -> None:
    assert problems(suite(admission(operation="UPDATE"))) == [
        "tests[0].oldObject: Required value: a UPDATE test needs it"
    ]
    assert problems(suite(admission(operation="DELETE"))) == [
        "tests[0].object: Forbidden: a DELETE has no new object; give oldObject only",
        "tests[0].oldObject: Required value: a DELETE test needs it",
    ]


# --- preparing ---------------------------------------------------------------------------------


def test_every_broken_test_is_reported_at_once_with_its_field() -> None:
    bad_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"resourceClaims": "x"}}
    found = problems(suite(
        admission(object="objects/missing.yaml"),
        admission(object=bad_pod),
        {"name": "fit", "allocate": claim_object("c"), "expectNodes": ["node-9"]},
        {"name": "nothing", "allocate": class_object(), "expectNodes": []},
    ))
    assert found == [
        "tests[0].object: objects/missing.yaml: no such file or directory",
        "tests[1].object.spec.resourceClaims: Invalid value: 'x': must be a list",
        "tests[2].expectNodes: node-9: not a Node of the state (nodes: node-1, node-2, node-3)",
        "tests[3].allocate: give one Pod (its claims and templates may come from the state) "
        "or ResourceClaims to allocate",
    ]


def test_an_object_file_must_hold_one_object() -> None:
    def two(name: str) -> list[Any]:
        return [class_object("a"), class_object("b")]

    assert problems(suite(admission(object="two.yaml")), two) == [
        "tests[0].object: two.yaml: holds 2 documents; give exactly one object"
    ]


def test_config_and_features_are_checked() -> None:
    found = problems(suite(admission(), config={"rules": {"selectors": {"mode": "block"}}}, features="fast"))
    assert found[0] == "config: rules.selectors.mode: Invalid value: 'block': Input should be 'enforce', " \
        "'warn' or 'audit'"
    assert found[1].startswith("features: unknown allocator feature(s) fast")


def test_config_file_errors_name_the_file() -> None:
    def read(name: str) -> list[Any]:
        return [{"rules": {"personas": {"mode": "warn", "admin": {}}}}]

    assert problems(suite(admission(), config="strict.yaml"), read) == [
        "config (strict.yaml): rules.personas.admin: unknown field; did you mean admins?"
    ]


def test_a_suite_takes_the_config_file_serve_takes() -> None:
    """The file the chart renders (with the server's logLevel, tls and certificates) is a suite's
    config as it is serve's; a misspelt top-level key is named with the one that was meant."""
    def read(name: str) -> list[Any]:
        return [{"rules": {"personas": {"mode": "warn"}}, "logLevel": "info", "tls": {"minVersion": "1.2"},
                 "certificates": {"mode": "selfManaged", "service": "draguard", "namespace": "n"}}]

    prepared = prepare(parse_suite(suite(admission(), config="chart.yaml")), state(), read, NOW)
    assert prepared.context.config.rules.personas.mode == "warn"
    assert problems(suite(admission(), config={"logLevl": "info"})) == [
        "config: logLevl: unknown field; did you mean logLevel?"
    ]


def test_files_come_from_the_reader_and_objects_are_defaulted_as_the_api_server_would() -> None:
    asked: list[str] = []

    def read(name: str) -> list[Any]:
        asked.append(name)
        return [claim_object("one")]

    prepared = prepare(parse_suite(suite(admission(object="claims/one.yaml"))), state(), read, NOW)
    assert asked == ["claims/one.yaml"]
    (case,) = prepared.cases
    assert isinstance(case, AdmissionCase)
    claim = case.request.obj
    assert isinstance(claim, ResourceClaim)
    requests = claim.spec.devices.requests
    assert requests is not None
    exactly = requests[0].exactly
    assert exactly is not None and (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)
    assert case.request.user == DEFAULT_USER
    assert (case.request.resource, case.request.namespace) == ("resourceclaims", "team-a")


def test_allocation_of_a_pod_uses_the_templates_of_the_state() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "team-a"},
        "spec": {"spec": claim_object("x")["spec"]},
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                 "containers": [{"name": "c"}]},
    }
    prepared = prepare(
        parse_suite(suite({"name": "fit", "allocate": [template, pod], "expectNodes": ["node-1", "node-2"]})),
        state(), no_files, NOW,
    )
    (case,) = prepared.cases
    assert isinstance(case, AllocationCase) and case.question.claims is None
    assert [c.name for c in pod_claims(case.snapshot, case.question.pod)] == ["p-gpu"]
    assert run_suite(prepared, RULES).results[0].passed


def test_allocation_reads_its_documents_as_the_allocate_command_does() -> None:
    """A driver demo's file: a Deployment whose template uses a claim template, next to a
    Namespace and a custom resource. The workload's template is the pod allocated, the other kinds
    are skipped; an older DRA version is refused with the reason and the fix."""
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "team-a"},
        "spec": {"spec": claim_object("x")["spec"]},
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team-a"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                    "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
                },
            },
        },
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    domain = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain", "metadata": {"name": "d"}}
    documents = [namespace, template, domain, deployment]
    test = {"name": "fit", "allocate": documents, "expectNodes": ["node-1", "node-2"]}
    prepared = prepare(parse_suite(suite(test)), state(), no_files, NOW)
    (case,) = prepared.cases
    assert isinstance(case, AllocationCase) and case.question.pod.name == "d"
    assert run_suite(prepared, RULES).results[0].passed

    older = {**template, "apiVersion": "resource.k8s.io/v1beta1"}
    (problem,) = problems(suite({**test, "allocate": [older, deployment]}))
    assert problem.startswith(
        'tests[0].allocate: document 1: apiVersion: Unsupported value: "resource.k8s.io/v1beta1"'
    )
    assert "draguard convert" in problem


def test_an_admission_test_of_an_object_the_api_server_refuses_is_broken() -> None:
    """A v1beta1 claim never reaches a webhook of a default 1.36 server: an 'allow' test of it
    passed for nothing (the rules were never asked)."""
    older = {**claim_object("c"), "apiVersion": "resource.k8s.io/v1beta1"}
    older["spec"] = {"devices": {"requests": [{"name": "gpus", "deviceClassName": "gpu.example.com"}]}}
    (problem,) = problems(suite(admission(object=older)))
    assert problem.startswith('tests[0].object: apiVersion: Unsupported value: "resource.k8s.io/v1beta1"')


def test_a_pod_whose_template_is_missing_is_a_broken_test() -> None:
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "nope"}]},
    }
    assert problems(suite({"name": "fit", "allocate": pod, "expectNodes": []})) == [
        "tests[0].allocate: pod team-a/p: claim 'gpu': resource claim template team-a/nope not found"
    ]


# --- expectations --------------------------------------------------------------------------------


@dataclass
class StandIn:
    """A rule whose findings the test chooses (it borrows the selectors config section)."""

    findings: Sequence[Finding]
    name: str = "selectors"
    mutating: bool = False

    def applies(self, request: Request, ctx: Context) -> bool:
        return True

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        return self.findings


WARN = Finding("warn", "selector matches nothing")
DENY = Finding("deny", "selector does not compile")
PATCH = ({"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},)


def verdict(test: dict[str, Any], *findings: Finding) -> CaseResult:
    prepared = prepare(parse_suite(suite(test)), state(), no_files, NOW)
    # A rule that patches is a mutating one: in the admission chain only their patches apply.
    return run_suite(prepared, [StandIn(findings, mutating=any(f.patch for f in findings))]).results[0]


@pytest.mark.parametrize(
    ("expect", "findings", "passed"),
    [
        ("allow", (), True),
        ("allow", (WARN,), True),  # warnings are permitted unless the test lists them
        ("allow", (DENY,), False),
        ("warn", (WARN,), True),
        ("warn", (), False),
        ("warn", (DENY,), False),
        ("deny", (DENY,), True),
        ("deny", (WARN,), False),
        ("deny", (), False),
    ],
)
def test_expect(expect: str, findings: tuple[Finding, ...], passed: bool) -> None:
    assert verdict(admission(expect=expect), *findings).passed is passed


def test_reasons_say_what_was_expected_and_what_happened() -> None:
    assert verdict(admission(expect="deny"), WARN).reason == (
        "expected denied, got allowed with 1 warning: selector matches nothing"
    )
    assert verdict(admission(expect="deny"), DENY).reason == "denied: selector does not compile"
    assert verdict(admission(expect="warn")).reason == "expected allowed with a warning, got allowed"


def test_warnings_list_demands_exactly_those_warnings() -> None:
    other = Finding("warn", "reads attribute modle")
    assert not verdict(admission(warnings=[]), WARN).passed
    assert verdict(admission(warnings=["matches nothing"]), WARN).passed
    assert verdict(admission(warnings=["modle", "nothing"]), WARN, other).passed
    assert not verdict(admission(warnings=["nothing"]), WARN, other).passed
    assert not verdict(admission(warnings=["nothing", "nothing"]), WARN, other).passed


def test_message_contains_reads_the_denial_or_the_warnings() -> None:
    assert verdict(admission(expect="deny", messageContains="not compile"), DENY).passed
    failed = verdict(admission(expect="deny", messageContains="no device"), DENY)
    assert failed.reason == (
        "expected the message to contain 'no device', got denied: selector does not compile"
    )
    assert verdict(admission(expect="warn", messageContains="nothing"), WARN).passed
    assert verdict(admission(expect="allow", messageContains="nothing"), WARN).passed
    assert not verdict(admission(expect="warn", messageContains="compile"), WARN).passed


def test_patch_is_compared_when_given() -> None:
    patched = Finding("warn", "labelled", PATCH)
    assert verdict(admission(expect="warn", patch=list(PATCH)), patched).passed
    assert verdict(admission(expect="warn"), patched).passed  # not checked when absent
    failed = verdict(admission(expect="warn", patch=[]), patched)
    assert not failed.passed
    assert failed.reason.startswith('expected the patch [], got [{"op": "add", "path": "/metadata/labels"')
    assert failed.actual["patch"] == [dict(PATCH[0])]


def test_allocation_failure_says_why_an_expected_node_does_not_fit() -> None:
    three = claim_object("c", count=3)
    result = verdict({"name": "fit", "allocate": three, "expectNodes": ["node-1", "node-2"]})
    assert not result.passed
    assert result.reason.startswith("expected to fit on node-1, node-2, but it fits on node-2 (node-1: ")
    assert result.actual["fits"] == ["node-2"]
    assert set(result.actual["doesNotFit"]) == {"node-1", "node-3"}
