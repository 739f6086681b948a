"""FieldError prints like apimachinery's field.Error (field/errors.go)."""

from __future__ import annotations

import pytest

from policies.validation.fielderrors import (
    Path,
    duplicate,
    forbidden,
    go_float,
    go_quote,
    internal,
    invalid,
    not_found,
    not_supported,
    render,
    required,
    too_long,
    too_many,
    unknown_field,
)

P = Path("spec").child("devices", "requests").index(0).child("exactly")


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            required(P.child("deviceClassName")),
            "spec.devices.requests[0].exactly.deviceClassName: Required value",
        ),
        (required(P, "must be set"), "spec.devices.requests[0].exactly: Required value: must be set"),
        (
            invalid(P.child("count"), -1, "must be greater than zero"),
            "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
        ),
        (invalid(P, "a\tb", "x"), 'spec.devices.requests[0].exactly: Invalid value: "a\\tb": x'),
        (invalid(P, True, "x"), "spec.devices.requests[0].exactly: Invalid value: true: x"),
        (invalid(P, None, "x"), "spec.devices.requests[0].exactly: Invalid value: null: x"),
        (invalid(P, 1.5, "x"), "spec.devices.requests[0].exactly: Invalid value: 1.5: x"),
        (invalid(P, ["a"], "x"), 'spec.devices.requests[0].exactly: Invalid value: ["a"]: x'),
        (
            not_supported(Path("m"), "Any", ["All", "ExactCount"]),
            'm: Unsupported value: "Any": supported values: "All", "ExactCount"',
        ),
        (not_supported(Path("m"), "Any", []), 'm: Unsupported value: "Any"'),
        (duplicate(Path("l").index(1), "a"), 'l[1]: Duplicate value: "a"'),
        (not_found(Path("k"), "x"), 'k: Not found: "x"'),
        (forbidden(Path("f"), "not allowed"), "f: Forbidden: not allowed"),
        (too_long(Path("s"), 63), "s: Too long: may not be more than 63 bytes"),
        (too_long(Path("s"), 1), "s: Too long: may not be more than 1 byte"),
        (too_many(Path("l"), 33, 32), "l: Too many: 33: must have at most 32 items"),
        # field.TooMany: singular for a limit of one, no limit shown when it is negative.
        (too_many(Path("l"), 2, 1), "l: Too many: 2: must have at most 1 item"),
        (too_many(Path("l"), 2, -1), "l: Too many: 2: has too many items"),
        (internal(Path("i"), "boom"), "i: Internal error: boom"),
        (unknown_field(Path("spec").child("foo")), 'unknown field "spec.foo"'),
    ],
)
def test_rendering(error: object, text: str) -> None:
    assert str(error) == text


def test_paths() -> None:
    assert (
        str(Path("spec").child("devices").index(2).key("a/b").child("string"))
        == "spec.devices[2][a/b].string"
    )
    assert str(Path().child("kind")) == "kind"
    assert Path("a").index(1) == Path("a").index(1)


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"\\', '"say \\"hi\\"\\\\"'),
        ("\n\r\t\a\b\f\v", '"\\n\\r\\t\\a\\b\\f\\v"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("ünïcode ✓", '"ünïcode ✓"'),
        ("\u200b", '"\\u200b"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, "1.5"),
        (100.0, "100"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (0.0001, "0.0001"),
        (1e-05, "1e-05"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (float("inf"), "+Inf"),
    ],
)
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_render_drops_repeated_lines_like_to_aggregate() -> None:
    errors = [required(Path("a")), required(Path("a")), required(Path("b"))]
    assert render(errors) == ["a: Required value", "b: Required value"]
