"""Name formats, with apimachinery's exact messages.

The message texts come from ``staging/src/k8s.io/apimachinery/pkg/api/validate/content`` and
``pkg/util/validation`` (1.36): ``IsDNS1123Label``, ``IsDNS1123Subdomain``, ``IsLabelKey`` (a
"qualified name"), ``IsLabelValue``, ``IsCIdentifier``. The ``is_*`` functions return the list of
problems (empty when valid) exactly like their Go counterparts; the ``validate_*`` functions wrap
them into field errors the way the resource validation (``pkg/apis/resource/validation``) does.
"""

from __future__ import annotations

import re

from policies.validation.fielderrors import ErrorList, Path, go_quote, invalid, required, too_long

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
LABEL_KEY_NAME_MAX = 63
DRIVER_NAME_MAX = 63  # resource.DriverNameMaxLength, the CSI driver name limit
POOL_NAME_MAX = 253  # resource.PoolNameMaxLength
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_'"
)


def _full(fmt: str) -> re.Pattern[str]:
    # Go's regexp "^...$" never matches before a trailing newline; fullmatch has the same meaning.
    return re.compile(fmt, re.ASCII)


_DNS1123_LABEL = _full(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = _full(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY = _full(_LABEL_KEY_FMT)
_LABEL_VALUE = _full(_LABEL_VALUE_FMT)
_C_IDENTIFIER = _full(_C_IDENTIFIER_FMT)


def max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def empty_error() -> str:
    return "must be non-empty"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery ``RegexError``, including its two spaces before each "or"."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = "".join((" or " if i else "") + f"'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _size(value: str) -> int:
    """Go measures strings in bytes."""
    return len(value.encode("utf-8"))


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if _size(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if _size(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """``path.IsValidPathSegmentName`` (``staging/src/k8s.io/apimachinery/pkg/api/validation/path``):
    the names of kinds whose name is only ever a URL path segment (RBAC roles, core Events)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def is_label_key(value: str) -> list[str]:
    """``IsLabelKey`` (a.k.a. ``IsQualifiedName``): ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif _size(name) > LABEL_KEY_NAME_MAX:
        errs.append("name part " + max_len_error(LABEL_KEY_NAME_MAX))
    if not _LABEL_KEY.fullmatch(name):
        errs.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if _size(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_c_identifier(value: str) -> list[str]:
    if _C_IDENTIFIER.fullmatch(value):
        return []
    return [regex_error(_C_IDENTIFIER_MSG, _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]


# --- field-level helpers (pkg/apis/core/validation, pkg/apis/resource/validation) -----------------


def _each(path: Path, value: str, messages: list[str]) -> ErrorList:
    return [invalid(path, value, msg) for msg in messages]


def validate_dns_label(value: str, path: Path) -> ErrorList:
    """corevalidation.ValidateDNS1123Label: device, request and counter names."""
    return _each(path, value, is_dns1123_label(value))


def validate_dns_subdomain(value: str, path: Path) -> ErrorList:
    """corevalidation.ValidateDNS1123Subdomain: class names, node names."""
    return _each(path, value, is_dns1123_subdomain(value))


def validate_label_name(value: str, path: Path) -> ErrorList:
    """metav1validation.ValidateLabelName: taint keys, binding condition types, selector keys."""
    return _each(path, value, is_label_key(value))


def validate_label_value(value: str, path: Path) -> ErrorList:
    return _each(path, value, is_label_value(value))


def validate_driver_name(value: str, path: Path) -> ErrorList:
    """corevalidation.ValidateCSIDriverName: required, at most 63 bytes, a DNS subdomain ignoring case.

    An empty name reports only "Required value" (the 1.36 helper short-circuits, as declarative
    validation does).
    """
    if not value:
        return [required(path)]
    errs: ErrorList = []
    if _size(value) > DRIVER_NAME_MAX:
        errs.append(too_long(path, DRIVER_NAME_MAX))
    errs += _each(path, value, is_dns1123_subdomain(value.lower()))
    return errs


def validate_pool_name(value: str, path: Path) -> ErrorList:
    """One or more DNS subdomains separated by "/", at most 253 bytes in total."""
    if not value:
        return [required(path)]
    errs: ErrorList = []
    if _size(value) > POOL_NAME_MAX:
        errs.append(too_long(path, POOL_NAME_MAX))
    for part in value.split("/"):
        errs += validate_dns_subdomain(part, path)
    return errs


def validate_c_identifier(value: str, path: Path) -> ErrorList:
    errs: ErrorList = []
    if _size(value) > DEVICE_MAX_ID_LENGTH:
        errs.append(too_long(path, DEVICE_MAX_ID_LENGTH))
    errs += _each(path, value, is_c_identifier(value))
    return errs


def validate_qualified_name(value: str, path: Path) -> ErrorList:
    """A device attribute or capacity name: ``ID`` or ``domain/ID``."""
    parts = value.split("/")
    if len(parts) == 1:
        return validate_c_identifier(parts[0], path)
    if len(parts) > 2:
        return [invalid(path, value, "must not contain more than one slash")]
    domain, ident = parts
    errs: ErrorList = []
    if not domain:
        errs.append(invalid(path, "", "the domain must not be empty"))
    else:
        errs += validate_driver_name(domain, path)
    if not ident:
        errs.append(invalid(path, "", "the name must not be empty"))
    else:
        errs += validate_c_identifier(ident, path)
    return errs


def validate_fully_qualified_name(value: str, path: Path) -> ErrorList:
    """A qualified name that must carry a domain (``matchAttribute``, ``distinctAttribute``)."""
    errs = validate_qualified_name(value, path)
    if "/" not in value:
        errs.append(
            invalid(path, value, "a fully qualified name must be a domain and a name separated by a slash")
        )
    return errs


def validate_node_name(value: str, path: Path) -> ErrorList:
    return validate_dns_subdomain(value, path)


_HEX = frozenset("0123456789abcdefABCDEF")
_UUID_HEX_PAIRS = (0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34)


def _uuid_problem(value: str) -> str | None:
    """github.com/google/uuid ``Validate``: the forms it accepts and its error texts (lengths in bytes)."""
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) == 36 + 9:
        if raw[:9].lower() != b"urn:uuid:":
            return f"invalid urn prefix: {go_quote(raw[:9].decode('utf-8', 'replace'))}"
        raw = raw[9:]
    elif len(raw) == 36 + 2:
        if raw[:1] != b"{" or raw[-1:] != b"}":
            return "invalid bracketed UUID format"
        raw = raw[1:-1]
    elif len(raw) == 32:
        return None if all(chr(b) in _HEX for b in raw) else "invalid UUID format"
    elif len(raw) != 36:
        return f"invalid UUID length: {len(raw)}"
    text = raw.decode("latin-1")
    if any(text[i] != "-" for i in (8, 13, 18, 23)):
        return "invalid UUID format"
    if any(text[i] not in _HEX or text[i + 1] not in _HEX for i in _UUID_HEX_PAIRS):
        return "invalid UUID format"
    return None


def validate_uid(value: str, path: Path) -> ErrorList:
    """A share ID: an RFC 4122 UUID in its 36-character lowercase form (``validateUID``)."""
    problem = _uuid_problem(value)
    if problem is not None:
        return [invalid(path, value, f"error validating uid: {problem}")]
    if len(value.encode()) != 36 or value != value.lower():
        return [
            invalid(
                path,
                value,
                "uid must be in RFC 4122 normalized form, "
                "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
            )
        ]
    return []


NATIVE_PREFIX = "kubernetes.io/"
REQUESTS_PREFIX = "requests."


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: domain-qualified, not native, valid as ``requests.<name>``."""
    if "/" not in name or NATIVE_PREFIX in name or name.startswith(REQUESTS_PREFIX):
        return False
    return not is_label_key(REQUESTS_PREFIX + name)


HUGEPAGES_PREFIX = "hugepages-"


def is_node_allocatable_resource_name(name: str) -> bool:
    """corehelper.IsNodeAllocatableResourceName: cpu, memory and hugepages-<size> (not ephemeral-storage)."""
    return name in ("cpu", "memory") or name.startswith(HUGEPAGES_PREFIX)


# --- pod fields (apimachinery pkg/util/validation: IsValidPortName, IsValidPortNum, ...) ------------

_PORT_NAME_CHARSET = re.compile("[-a-z0-9]+")
_PORT_NAME_MAX = 15
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY = _full(_CONFIG_MAP_KEY_FMT)
_HTTP_HEADER_NAME_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_NAME = _full(_HTTP_HEADER_NAME_FMT)
INT32_MAX = 2**31 - 1


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(name: str) -> list[str]:
    """An IANA_SVC_NAME: at most 15 characters of a-z, 0-9 and '-', at least one letter."""
    errs = []
    if len(name) > _PORT_NAME_MAX:
        errs.append(f"must be no more than {_PORT_NAME_MAX} characters")
    if not _PORT_NAME_CHARSET.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_relaxed_env_var_name(name: str) -> list[str]:
    """IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation is GA): printable ASCII but '='."""
    errs = []
    if not name:
        errs.append("environment variable name " + empty_error())
    if any(ord(ch) > 126 or ord(ch) < 32 or ch == "=" for ch in name):
        errs.append(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
        )
    return errs


def is_config_map_key(key: str) -> list[str]:
    errs = []
    if _size(key) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_MAP_KEY.fullmatch(key):
        errs.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_MAP_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    if key in (".", ".."):
        errs.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_http_header_name(name: str) -> list[str]:
    if _HTTP_HEADER_NAME.fullmatch(name):
        return []
    return [
        regex_error(
            "a valid HTTP header must consist of alphanumeric characters or '-'",
            _HTTP_HEADER_NAME_FMT,
            "X-Header-Name",
        )
    ]


def is_valid_id(value: int) -> list[str]:
    """IsValidUserID / IsValidGroupID: 0 to MaxInt32."""
    return [] if 0 <= value <= INT32_MAX else [inclusive_range_error(0, INT32_MAX)]
