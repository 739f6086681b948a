"""The Kubernetes Format library (``library/format.go``): ``format.named(name)`` and the
``format.<name>()`` constants, and ``<Format>.validate(s)`` returning ``optional.none()`` when ``s``
is valid or ``optional.of(<list of problems>)``.

The apimachinery name rules (``IsDNS1123Label``, ``IsDNS1123Subdomain``, ``IsDNS1035Label``,
``IsQualifiedName``, ``IsValidLabelValue``, and the ``...Prefix`` variants that accept a trailing
``-`` by validating ``name[:-2] + "a"``) are re-implemented here with their messages, because this
package sits below ``policies.validation`` in the layering. ``uri`` reports Go's
``ParseRequestURI`` error; ``uuid``, ``byte``, ``date`` and ``datetime`` follow kube-openapi's strfmt
checks (best effort: their exact regular expressions are from the go-openapi strfmt lineage).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from typing import Any

from policies.cel.library import urls
from policies.cel.library.cost import CallSite, CostRule, scale
from policies.cel.library.overload import Overload
from policies.cel.library.regex import compile_regex
from policies.cel.library.values import NamedFormat, Optional

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _KEY_NAME + ")?"
_UUID = "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
_BASE64 = "^(?:[A-Za-z0-9+\\/]{4})*(?:[A-Za-z0-9+\\/]{2}==|[A-Za-z0-9+\\/]{3}=|[A-Za-z0-9+\\/]{4})$"
_DATE_TIME = "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
_GOVALIDATOR_URL_LENGTH = 1056  # len(govalidator.URL), the estimate upstream uses for "uri"


def _full(pattern: str, text: str) -> bool:
    return compile_regex(f"^(?:{pattern})$").search(text) is not None


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery RegexError."""
    shown = "".join((" or " if i else "") + f"'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} bytes"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def dns1123_label(value: str) -> list[str]:
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not _full(_LABEL, value):
        if _full(_SUBDOMAIN, value):
            errs.append("must not contain dots")
        else:
            errs.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character",
                    _LABEL,
                    "my-name",
                    "123-abc",
                )
            )
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = [_max_len(253)] if _size(value) > 253 else []
    if not _full(_SUBDOMAIN, value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                "'.', and must start and end with an alphanumeric character",
                _SUBDOMAIN,
                "example.com",
            )
        )
    return errs


def dns1035_label(value: str) -> list[str]:
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not _full(_DNS1035, value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                _DNS1035,
                "my-name",
                "abc-123",
            )
        )
    return errs


def qualified_name(value: str) -> list[str]:
    name_message = (
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character"
    )
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(name_message, _KEY_NAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + msg for msg in dns1123_subdomain(parts[0])]
    if not name:
        errs.append("name part must be non-empty")
    elif _size(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _full(_KEY_NAME, name):
        errs.append("name part " + _regex_error(name_message, _KEY_NAME, "MyName", "my.name", "123-abc"))
    return errs


def label_value(value: str) -> list[str]:
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not _full(_LABEL_VALUE, value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                "or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


Check = Callable[[str], list[str]]


def _with_prefix_mask(check: Check) -> Check:
    """NameIsDNS...(name, prefix=true): a generated-name prefix may end in '-'."""

    def masked(value: str) -> list[str]:
        if len(value) > 1 and value.endswith("-"):
            value = value[:-2] + "a"
        return check(value)

    return masked


def _uri(value: str) -> list[str]:
    problem = urls.request_uri_problem(value)
    return [] if problem is None else [problem]


def _is_date(value: str) -> bool:
    if not _full("[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return False
    try:
        datetime.date(int(value[:4]), int(value[5:7]), int(value[8:10]))
    except ValueError:
        return False
    return True


def _is_datetime(value: str) -> bool:
    parts = value.lower().split("t")
    if len(value) < 4 or len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = compile_regex(_DATE_TIME).search(parts[1])
    return match is not None and match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


def _problem_if(message: str, check: Callable[[str], bool]) -> Check:
    return lambda value: [] if check(value) else [message]


def _fmt(name: str, check: Check, regex_size: int) -> NamedFormat:
    return NamedFormat(name, check, regex_size)


FORMATS: dict[str, NamedFormat] = {
    "dns1123Label": _fmt("DNS1123Label", dns1123_label, 30),
    "dns1123Subdomain": _fmt("DNS1123Subdomain", dns1123_subdomain, 60),
    "dns1035Label": _fmt("DNS1035Label", dns1035_label, 30),
    "qualifiedName": _fmt("QualifiedName", qualified_name, 60),
    "dns1123LabelPrefix": _fmt("DNS1123LabelPrefix", _with_prefix_mask(dns1123_label), 30),
    "dns1123SubdomainPrefix": _fmt("DNS1123SubdomainPrefix", _with_prefix_mask(dns1123_subdomain), 60),
    "dns1035LabelPrefix": _fmt("DNS1035LabelPrefix", _with_prefix_mask(dns1035_label), 30),
    "labelValue": _fmt("LabelValue", label_value, 40),
    "uri": _fmt("URI", _uri, _GOVALIDATOR_URL_LENGTH),
    "uuid": _fmt(
        "uuid", _problem_if("does not match the UUID format", lambda v: _full(_UUID, v)), len(_UUID)
    ),
    "byte": _fmt("byte", _problem_if("invalid base64", lambda v: _full(_BASE64, v)), len(_BASE64)),
    "date": _fmt("date", _problem_if("invalid date", _is_date), len(_DATE_TIME)),
    "datetime": _fmt("datetime", _problem_if("invalid datetime", _is_datetime), len(_DATE_TIME)),
}


def named(name: str) -> Optional:
    found = FORMATS.get(name)
    return Optional.none() if found is None else Optional.of(found)


def validate(fmt: NamedFormat, value: str) -> Optional:
    problems = fmt.validate(value)
    return Optional.of(problems) if problems else Optional.none()


MAX_NAME_FORMAT_REGEX_SIZE = 128  # apiservercel.MaxNameFormatRegexSize, the estimator's bound


def _validate_estimate(site: CallSite) -> tuple[int, int]:
    return scale(scale(site.size(1), 0.1), MAX_NAME_FORMAT_REGEX_SIZE * 0.25)


def _validate_actual(args: Sequence[Any], result: Any) -> int:
    fmt: NamedFormat = args[0]
    value: str = args[1]
    return math.ceil((1 + len(value)) * 0.1) * math.ceil(fmt.max_regex_size * 0.25)


_VALIDATE_COST = CostRule("(text + 1) x format regex size", _validate_estimate, _validate_actual)


def _constant(fmt: NamedFormat) -> Callable[[], NamedFormat]:
    return lambda: fmt


OVERLOADS: tuple[Overload, ...] = (
    Overload("format.named", "format-named", False, ("string",), "optional_type(Format)", named),
    Overload(
        "validate",
        "format-validate",
        True,
        ("Format", "string"),
        "optional_type(list(string))",
        validate,
        _VALIDATE_COST,
    ),
    *(
        Overload(f"format.{name}", f"format.{name}", False, (), "Format", _constant(fmt))
        for name, fmt in FORMATS.items()
    ),
)
