"""Rule selectors: compile errors deny with the field and column; surprises on real devices warn."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from rule_fixtures import ADMIN, admission, cluster, context

from policies.api.resource import Device
from policies.cel import CompileError, Environment, EvalError, Program, bind_device, compile_expression
from policies.rules.engine import Context, RuleUnavailable, decide
from policies.rules.selectors import STORED_EXPRESSIONS, SelectorsRule
from policies.validation.cel import NEW_EXPRESSIONS

MODEL = 'device.attributes["gpu.example.com"].model'
A100 = f'{MODEL} == "a100"'
H100 = f'{MODEL} == "h100"'
BROKEN = "device.driver =="
REQUEST = "spec.devices.requests[0].exactly"


def selectors(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in expressions]


def claim(*expressions: str, device_class: str = "gpu.example.com") -> dict[str, Any]:
    request = {"deviceClassName": device_class, "selectors": selectors(*expressions)}
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}},
    }


def device_class(*expressions: str, name: str = "fast-gpu") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name}, "spec": {"selectors": selectors(*expressions)},
    }


def compile_message(expression: str) -> tuple[int | None, str]:
    """What the CEL engine says about an expression the API server would refuse."""
    with pytest.raises(CompileError) as err:
        compile_expression(expression, NEW_EXPRESSIONS)
    return err.value.column, err.value.message


def messages(obj: dict[str, Any], ctx: Context | None = None, **kwargs: Any) -> list[tuple[str, str]]:
    findings = SelectorsRule().check(admission(obj, **kwargs), ctx or context())
    return [(f.action, f.message) for f in findings]


def test_selector_that_matches_devices_is_allowed_silently() -> None:
    request = admission(claim(A100))
    decision = decide(request, [SelectorsRule()], context())
    assert decision.allowed and decision.warnings == () and decision.outcomes == ()


def test_compile_error_is_denied_with_field_path_and_column() -> None:
    column, engine = compile_message(BROKEN)
    assert column == 17
    decision = decide(admission(claim(A100, BROKEN)), [SelectorsRule()], context())
    assert not decision.allowed
    assert decision.message == (
        f"ResourceClaim team-a/c: {REQUEST}.selectors[1].cel.expression: "
        f"invalid CEL expression at column 17: {engine}"
    )


def test_device_class_and_template_and_subrequest_paths() -> None:
    _, engine = compile_message(BROKEN)
    assert messages(device_class(A100, BROKEN)) == [(
        "deny",
        "DeviceClass fast-gpu: spec.selectors[1].cel.expression: "
        f"invalid CEL expression at column 17: {engine}",
    )]
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "team-a"},
        "spec": {"spec": claim(BROKEN)["spec"]},
    }
    assert messages(template)[0][1].startswith(
        f"ResourceClaimTemplate team-a/t: spec.{REQUEST}.selectors[0].cel.expression: invalid CEL"
    )
    prioritized = claim()
    prioritized["spec"]["devices"]["requests"][0] = {"name": "gpus", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.example.com", "selectors": selectors(A100)},
        {"name": "small", "deviceClassName": "gpu.example.com", "selectors": selectors(A100, BROKEN)},
    ]}
    assert messages(prioritized) == [(
        "deny",
        "ResourceClaim team-a/c: spec.devices.requests[0].firstAvailable[1].selectors[1].cel.expression: "
        f"invalid CEL expression at column 17: {engine}",
    )]


def test_selector_matching_no_device_warns() -> None:
    v100 = f'{MODEL} == "v100"'
    assert messages(claim(v100)) == [(
        "warn",
        f"ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression matches none of the 10 devices "
        'of DeviceClass "gpu.example.com"',
    )]
    assert messages(device_class(v100)) == [(
        "warn",
        "DeviceClass fast-gpu: spec.selectors[0].cel.expression "
        "matches none of the 10 devices in the cluster",
    )]
    quiet = context(selectors={"warnNoMatch": False})
    assert SelectorsRule().check(admission(claim(v100)), quiet) == []


def test_request_selectors_only_see_devices_of_their_class() -> None:
    """A class that selects only the H100s: an A100 request through it matches nothing."""
    snapshot = cluster(device_class('device.driver == "gpu.example.com"', H100, name="h100"))
    assert messages(claim(A100, device_class="h100"), ctx=context(snapshot)) == [(
        "warn",
        f'ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression matches none of the 2 devices '
        'of DeviceClass "h100"',
    )]


def test_selectors_that_match_only_separately_warn_once_for_the_combination() -> None:
    assert messages(claim(A100, H100)) == [(
        "warn", f'ResourceClaim team-a/c: {REQUEST}.selectors match none of the 10 devices of DeviceClass '
        '"gpu.example.com" together, although each of them matches some',
    )]


def test_unknown_and_empty_class() -> None:
    assert messages(claim(A100, device_class="tpu.example.com")) == [(
        "warn", f'ResourceClaim team-a/c: {REQUEST}.deviceClassName: DeviceClass "tpu.example.com" does not '
        "exist (yet); the request cannot be allocated until it does",
    )]
    snapshot = cluster(device_class('device.driver == "tpu.example.com"', name="tpu"))
    assert messages(claim(device_class="tpu"), ctx=context(snapshot)) == [(
        "warn",
        f'ResourceClaim team-a/c: {REQUEST}.deviceClassName: DeviceClass "tpu" selects none of the 10 '
        "devices in the cluster",
    )]


def test_misspelled_attribute_warns_with_the_closest_published_name() -> None:
    found = messages(claim('device.attributes["gpu.example.com"].modle == "a100"'))
    assert found[0] == (
        "warn", f'ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression reads attribute '
        '"gpu.example.com/modle", which no device of driver gpu.example.com publishes; '
        'did you mean "gpu.example.com/model"?',
    )
    domain = messages(claim('device.capacity["gpu.exmaple.com"].memory.isGreaterThan(quantity("1"))'))
    assert domain[0] == (
        "warn", f'ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression reads capacity '
        '"gpu.exmaple.com/memory", which no device in the cluster publishes; '
        'did you mean "gpu.example.com/memory"?',
    )
    off = context(selectors={"warnUnknownAttributes": False, "warnNoMatch": False})
    unguarded = messages(claim('device.attributes["x"].y == 1'), ctx=off)
    assert unguarded and all("reads attribute" not in m for _, m in unguarded)


def test_a_misspelled_name_read_through_cel_bind_is_still_found() -> None:
    """The names come from the compiled expression, so a bound variable hides nothing."""
    expression = 'cel.bind(g, device.attributes["gpu.example.com"], g.modle == "a100")'
    warned = [m for _, m in messages(claim(expression))]
    assert any('reads attribute "gpu.example.com/modle"' in m and 'did you mean "gpu.example.com/model"' in m
               for m in warned), warned


def test_selector_failing_on_some_devices_names_them_and_why() -> None:
    """Only the new node-4 device publishes `mig`; the selector fails on the ten others."""
    mig_device = {"name": "gpu-0", "attributes": {"mig": {"bool": True}, "model": {"string": "a100"}}}
    node4 = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-4-gpu"},
        "spec": {
            "driver": "gpu.example.com", "nodeName": "node-4", "devices": [mig_device],
            "pool": {"name": "node-4", "generation": 1, "resourceSliceCount": 1},
        },
    }
    expression = 'device.attributes["gpu.example.com"].mig'
    program = compile_expression(expression, STORED_EXPRESSIONS)
    plain = bind_device("gpu.example.com", Device(name="gpu-0"), pool="node-1")
    with pytest.raises(EvalError) as err:
        program.matches(plain)
    reason = err.value.message
    assert messages(claim(expression), ctx=context(cluster(node4))) == [(
        "warn",
        f"ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression fails on 10 of the 11 devices "
        'of DeviceClass "gpu.example.com", and a failing selector aborts scheduling of any pod whose search '
        f"reaches such a device: {reason} on gpu.example.com/node-1/gpu-0, gpu.example.com/node-1/gpu-1, "
        "gpu.example.com/node-1/gpu-2 and 7 more; make the expression safe for every device "
        '(guard optional names with has() or "name" in ...)',
    )]


def test_update_ratchets_unchanged_selectors() -> None:
    """An object stored with a selector that no longer compiles stays updatable; new ones are checked."""
    old = device_class(BROKEN)
    labelled = device_class(BROKEN)
    labelled["metadata"]["labels"] = {"team": "ml"}
    assert messages(labelled, operation="UPDATE", old=old, user=ADMIN) == []
    _, engine = compile_message("1 +")
    grown = device_class(BROKEN, "1 +")
    assert messages(grown, operation="UPDATE", old=old) == [
        ("deny",
         "DeviceClass fast-gpu: spec.selectors[1].cel.expression: "
         f"invalid CEL expression at column 4: {engine}")
    ]


def test_stale_snapshot_still_denies_compile_errors_but_cannot_warn() -> None:
    stale = context(fresh=False)
    assert messages(claim(BROKEN), ctx=stale)[0][0] == "deny"
    with pytest.raises(RuleUnavailable, match="cluster snapshot is stale"):
        SelectorsRule().check(admission(claim(A100)), stale)


def test_a_check_nobody_awaits_any_more_stops_between_selectors() -> None:
    # The webhook's deadline passed while the rule worked through many selectors: it must stop,
    # not go on compiling for the seconds hundreds of long selectors take.
    asked: list[bool] = []

    def cancelled_after_two() -> bool:
        asked.append(True)
        return len(asked) > 2

    expressions = [f'{MODEL} == "m{i}"' for i in range(50)]
    ctx = replace(context(), cancelled=cancelled_after_two)
    with pytest.raises(RuleUnavailable, match="stopped: the answer was no longer awaited"):
        SelectorsRule().check(admission(claim(*expressions)), ctx)
    assert len(asked) == 3
    # Not cancelled: every selector is checked (and none matches a device).
    assert len(messages(claim(*expressions))) == 50


def test_warn_mode_turns_the_deny_into_a_warning() -> None:
    decision = decide(admission(claim(BROKEN)), [SelectorsRule()], context(selectors={"mode": "warn"}))
    assert decision.allowed
    assert decision.warnings[0].startswith(f"ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression: ")


def test_bad_input_is_skipped_or_named() -> None:
    rule = SelectorsRule()
    no_cel = claim()
    no_cel["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{}]
    assert rule.check(admission(no_cel), context()) == []
    _, engine = compile_message("")
    assert messages(claim("")) == [
        ("deny",
         f"ResourceClaim team-a/c: {REQUEST}.selectors[0].cel.expression: "
         f"invalid CEL expression at column 1: {engine}")
    ]
    deleted = admission(None, operation="DELETE", old=claim(A100))
    assert not rule.applies(deleted, context())
    status = admission(claim(BROKEN), operation="UPDATE", old=claim(BROKEN), sub_resource="status")
    assert not rule.applies(status, context())


def test_the_rule_compiles_through_the_context() -> None:
    """The webhook hands the rule its CEL worker process through ``Context.compile``
    (webhook/celworker.py): every expression the rule compiles, for the API server's environment
    and for the scheduler's, goes through it."""
    asked: list[tuple[str, Environment]] = []

    def compile_(expression: str, env: Environment) -> Program:
        asked.append((expression, env))
        return compile_expression(expression, env)

    assert messages(claim(H100), replace(context(), compile=compile_)) == []
    assert (H100, NEW_EXPRESSIONS) in asked and (H100, STORED_EXPRESSIONS) in asked
