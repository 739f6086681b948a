"""The registry's shape: what the type checker and both engines rely on."""

import inspect

from policies.cel.library import OVERLOADS, CallSite
from policies.cel.library.cost import REGEX
from policies.cel.library.formats import FORMATS, validate


def test_overload_ids_are_unique() -> None:
    ids = [o.overload_id for o in OVERLOADS]
    assert len(ids) == len(set(ids))


def test_each_impl_accepts_its_declared_operands() -> None:
    for overload in OVERLOADS:
        signature = inspect.signature(overload.impl)
        signature.bind(*range(len(overload.params)))  # raises TypeError on an arity mismatch
        assert not overload.member or overload.params, overload.overload_id


def test_every_cost_rule_estimates_a_range() -> None:
    for overload in OVERLOADS:
        site = CallSite(sizes=tuple((0, 10) for _ in overload.params), elem_size=(0, 5))
        low, high = overload.cost.estimate(site)
        assert 0 <= low <= high, overload.overload_id


def test_k8s_cost_examples() -> None:
    by_id = {o.overload_id: o for o in OVERLOADS}
    assert by_id["dra_includes_dyn_dyn"].cost.estimate(CallSite(sizes=((0, 64), (0, 64)))) == (48, 48)
    assert by_id["dra_includes_dyn_dyn"].cost.actual([[1], 1], True) == 1
    assert by_id["string_to_quantity"].cost.actual(["1Ki"], None) == 1
    assert by_id["string_find_string"].cost.actual(["x" * 19, "[0-9]+"], "") == 2 * 2
    assert by_id["list_int_is_sorted_bool"].cost.actual([[1, 2, 3]], True) == 3


def test_worst_case_uses_maximum_sizes() -> None:
    by_id = {o.overload_id: o for o in OVERLOADS}
    # A 64-character attribute through lowerAscii(): ceil(64 x 0.1).
    assert by_id["string_lower_ascii"].cost.worst_case([64]) == 7
    # isSorted over 48 strings of at most 64 characters: 48 x (1 + ceil(64 x 0.1)).
    assert by_id["list_string_is_sorted_bool"].cost.worst_case([48], 64, text=True) == 48 * 8


def test_named_formats() -> None:
    assert set(FORMATS) >= {
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime",
        "dns1123LabelPrefix",
    }
    assert not validate(FORMATS["dns1123Label"], "my-label-name").has_value()
    assert validate(FORMATS["dns1123Label"], "a.b").value() == ["must not contain dots"]
    assert not validate(FORMATS["dns1123LabelPrefix"], "my-label-prefix-").has_value()
    assert validate(FORMATS["uri"], "../x").value() == ['parse "../x": invalid URI for request']
    assert not validate(FORMATS["datetime"], "2021-01-01T00:00:00Z").has_value()
    assert validate(FORMATS["date"], "2021-02-30").value() == ["invalid date"]


def test_call_costs_behind_upstream_dra_estimates() -> None:
    """Pieces of compile_test.go's reference estimates for a 64-character attribute (access = 4)."""
    by_id = {o.overload_id: o for o in OVERLOADS}
    # .matches("[^a]?sym") -> 18 = 4 + ceil(65 x 0.1) x ceil(8 x 0.25)
    assert REGEX.worst_case([64, 8]) == 14
    # .split("example").size() >= 2 -> 19 = 4 + ceil(64 x 0.2) + size() + >=
    assert by_id["string_split_string"].cost.worst_case([64, 7]) == 13
    # .includes(x) -> 52 = 4 + 48
    assert by_id["dra_includes_dyn_dyn"].cost.worst_case([64, 64]) == 48


def test_format_constants_and_named_lookup() -> None:
    by_id = {o.overload_id: o for o in OVERLOADS}
    label = by_id["format.dns1123Label"].impl()
    assert label.name == "DNS1123Label"
    assert by_id["format-named"].impl("dns1123Label").value() == label
    assert not by_id["format-named"].impl("noSuchFormat").has_value()


def test_name_format_messages() -> None:
    assert validate(FORMATS["dns1035Label"], "1abc").value() == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert validate(FORMATS["qualifiedName"], "/x").value() == ["prefix part must be non-empty"]
    assert validate(FORMATS["labelValue"], "x" * 64).value() == ["must be no more than 63 bytes"]
    assert not validate(FORMATS["labelValue"], "").has_value()
    assert validate(FORMATS["uuid"], "123").value() == ["does not match the UUID format"]
    assert validate(FORMATS["byte"], "a").value() == ["invalid base64"]


def test_global_parsers_estimate_one_but_charge_the_traversal_at_run_time() -> None:
    """cost.go prices quantity()/semver()/cidr()/ip()... only when called on a target."""
    by_id = {o.overload_id: o for o in OVERLOADS}
    text = "1" * 95
    for overload_id in ("string_to_quantity", "string_to_semver", "string_to_cidr", "string_to_ip", "is_ip"):
        assert by_id[overload_id].cost.worst_case([1000]) == 1, overload_id
        assert by_id[overload_id].cost.actual([text], None) == 10, overload_id
    assert by_id["ip_is_canonical"].cost.actual([text], None) == 19
    assert by_id["string_to_url"].cost.worst_case([1000]) == 100  # url() is priced by its argument


def test_list_scan_counts_string_bytes_and_truncates() -> None:
    by_id = {o.overload_id: o for o in OVERLOADS}
    # traversalCost: uint64(len(bytes) x 0.1) per string -- "é" x 10 is 20 bytes -> 2, "abc" -> 0.
    assert by_id["list_string_is_sorted_bool"].cost.actual([["\u00e9" * 10, "abc"]], True) == 2
    assert by_id["string_index_of_string"].cost.actual(["\u00e9" * 10, "x"], -1) == 2
