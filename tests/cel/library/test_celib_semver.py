"""Semver library (v1) rows from upstream's semver_test.go and blang/semver's rules (reworded)."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.cel.library import CELEvalError, Semver
from policies.cel.library.semver import OVERLOADS, is_semver, semver

FN = {o.overload_id: o.impl for o in OVERLOADS}


@pytest.mark.parametrize(
    ("text", "normalize", "expected"),
    [
        ("1.0.0", False, Semver(1, 0, 0)),
        ("0.1.0-alpha.1", False, Semver(0, 1, 0, ("alpha", 1))),
        ("v1.0.0", True, Semver(1, 0, 0)),
        ("1.0", True, Semver(1, 0, 0)),
        ("01.01.01", True, Semver(1, 1, 1)),
        ("v1", True, Semver(1, 0, 0)),
        ("1.2.3+build.7", False, Semver(1, 2, 3, (), ("build", "7"))),
    ],
)
def test_parse(text: str, normalize: bool, expected: Semver) -> None:
    assert semver(text, normalize) == expected


@pytest.mark.parametrize(
    ("text", "normalize", "message"),
    [
        ("", False, "Version string empty"),
        ("1.0", False, "No Major.Minor.Patch elements found"),
        ("v1.0.0", False, 'Invalid character\\(s\\) found in major number "v1"'),
        ("01.0.0", False, 'Major number must not contain leading zeroes "01"'),
        ("1.0.0-01", False, 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.0.0-a..b", False, "Prerelease is empty"),
        ("1.0.0+", False, "Build meta data is empty"),
        ("1.0.0-a_b", False, 'Invalid character\\(s\\) found in prerelease "a_b"'),
        ("1.0-rc1", True, "short version cannot contain PreRelease/Build meta data"),
        (
            "99999999999999999999.0.0",
            False,
            'strconv.ParseUint: parsing "99999999999999999999": value out of range',
        ),
    ],
)
def test_parse_errors(text: str, normalize: bool, message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        semver(text, normalize)
    assert not is_semver(text, normalize)


def test_is_semver_needs_normalization_for_a_v_prefix() -> None:
    assert not is_semver("v1.0")
    assert is_semver("v1.0", True)
    assert not is_semver("hello")


def test_accessors_and_comparisons() -> None:
    v = semver("1.2.3")
    assert (FN["semver_major"](v), FN["semver_minor"](v), FN["semver_patch"](v)) == (1, 2, 3)
    assert FN["semver_compare_to"](v, semver("1.2.3")) == 0
    assert FN["semver_compare_to"](v, semver("2.0.0")) == -1
    assert FN["semver_compare_to"](v, semver("0.1.2")) == 1
    assert FN["semver_is_greater_than"](semver("1.0.0"), semver("0.0.1"))
    assert FN["semver_is_less_than"](semver("1.0.0-rc.1"), semver("1.0.0"))


def test_major_beyond_int64_wraps_like_go() -> None:
    assert FN["semver_major"](semver("18446744073709551615.0.0")) == -1


def test_build_metadata_does_not_count() -> None:
    assert semver("1.0.0+a") == semver("1.0.0+b")
    assert semver("1.0.0+a").compare(semver("1.0.0")) == 0


def test_semver_2_precedence_example_chain() -> None:
    chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    versions = [semver(t) for t in chain]
    assert all(a.compare(b) == -1 for a, b in itertools.pairwise(versions))


def test_alphanumeric_prerelease_parts_compare_in_ascii_order() -> None:
    assert semver("1.0.0-Z").compare(semver("1.0.0-a")) == -1
    assert semver("1.0.0-a-b").compare(semver("1.0.0-a")) == 1


identifiers = st.one_of(
    st.integers(0, 50), st.text("ab-Z9", min_size=1, max_size=3).filter(lambda s: not s.isdigit())
)
versions = st.builds(
    Semver,
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.lists(identifiers, max_size=3).map(tuple),
)


@given(versions, versions, versions)
def test_compare_is_a_total_order(a: Semver, b: Semver, c: Semver) -> None:
    assert a.compare(b) == -b.compare(a)
    assert (a.compare(b) == 0) == (a == b)
    if a.compare(b) <= 0 and b.compare(c) <= 0:
        assert a.compare(c) <= 0


@given(versions)
def test_printing_and_parsing_round_trip(v: Semver) -> None:
    assert semver(str(v)) == v
