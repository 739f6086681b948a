"""Python values for the CEL types the plain Python types cannot tell apart or do not have.

``int`` is CEL int and ``UInt`` is CEL uint (so ``1 == 1u`` can be told from ``1 == 1``); ``Optional``
is cel-go's ``optional_type``; ``Semver``, ``URL``, ``IP``, ``CIDR`` and ``NamedFormat`` are the
Kubernetes library object types. All are immutable and hashable so they can sit in sets and caches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policies.api.quantity import Format, Quantity
from policies.cel.library.errors import CELEvalError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


class UInt(int):
    """CEL ``uint``: an int that stays distinct from CEL ``int`` (``type(1u) != type(1)``)."""

    def __new__(cls, value: int) -> UInt:
        if not 0 <= value <= UINT64_MAX:
            raise ValueError(f"uint value {value} is outside 0..2^64-1")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"{int(self)}u"


def check_int64(value: int) -> int:
    """Return ``value`` if it fits CEL's int64, else raise cel-go's overflow error."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise CELEvalError("integer overflow")
    return value


def check_uint64(value: int) -> UInt:
    """Return ``value`` as a uint if it fits, else raise cel-go's unsigned overflow error."""
    if not 0 <= value <= UINT64_MAX:
        raise CELEvalError("unsigned integer overflow")
    return UInt(value)


class DerivedQuantity(Quantity):
    """A Quantity that ``add()``/``sub()`` computed.

    Upstream returns those as Go pointers (``&apiservercel.Quantity{}``) while ``quantity()`` and
    device capacities are values, and ``apiservercel.Quantity.Equal`` only accepts a *value* on its
    right-hand side. So ``q.add(1) == quantity("2")`` can be true but ``quantity("2") == q.add(1)``
    and ``q.add(1) == q.add(1)`` are always false in Kubernetes; equality here keeps that apart.
    Everything else treats it as an ordinary Quantity.
    """

    __slots__ = ()

    @classmethod
    def of(cls, quantity: Quantity) -> DerivedQuantity:
        # Quantity's pickling state is its full representation (value, Go format, cached text).
        m, e, dec, fmt, text, original, json_number = quantity.__reduce__()[1]
        derived = cls._make(m, e, dec, Format(fmt), text, original, json_number)
        assert isinstance(derived, DerivedQuantity)
        return derived


_NO_VALUE: Any = object()


@dataclass(frozen=True)
class Optional:
    """cel-go's optional value: ``Optional.of(x)`` holds ``x``, ``Optional.none()`` holds nothing."""

    _value: Any = field(default=_NO_VALUE)

    @staticmethod
    def of(value: Any) -> Optional:
        return Optional(value)

    @staticmethod
    def none() -> Optional:
        return _NONE

    def has_value(self) -> bool:
        return self._value is not _NO_VALUE

    def value(self) -> Any:
        """The held value; an empty optional raises the error cel-go reports for ``.value()``."""
        if not self.has_value():
            raise CELEvalError("optional.none() dereference")
        return self._value

    def or_value(self, default: Any) -> Any:
        return self._value if self.has_value() else default

    def or_(self, other: Optional) -> Optional:
        return self if self.has_value() else other

    def __repr__(self) -> str:
        return f"optional.of({self._value!r})" if self.has_value() else "optional.none()"


_NONE = Optional()


@dataclass(frozen=True)
class Semver:
    """A semantic version as blang/semver v4 parses it (the library Kubernetes uses).

    Equality, hashing and ordering ignore build metadata, as semver 2.0.0 precedence does.
    Prerelease identifiers are ``int`` when numeric and ``str`` otherwise.
    """

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence (numeric prerelease parts sort before alphanumeric)."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.pre or not other.pre:
            return (len(other.pre) > 0) - (len(self.pre) > 0)
        for a, b in zip(self.pre, other.pre, strict=False):
            order = _compare_prerelease(a, b)
            if order:
                return order
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _compare_prerelease(a: int | str, b: int | str) -> int:
    """Numeric identifiers sort below alphanumeric ones; alike ones compare naturally (ASCII)."""
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return -1 if isinstance(a, int) else 1


@dataclass(frozen=True)
class Userinfo:
    """The ``user[:password]`` part of a URL, unescaped."""

    username: str
    password: str = ""
    password_set: bool = False


@dataclass(frozen=True)
class URL:
    """A URL split the way Go's ``net/url`` splits it (``kubernetes.URL`` in CEL).

    Fields hold what Go's ``url.URL`` holds; the ``getX()`` CEL functions and equality (by the
    reassembled string) live in ``policies.cel.library.urls``.
    """

    scheme: str = ""
    opaque: str = ""
    user: Userinfo | None = None
    host: str = ""
    omit_host: bool = False
    path: str = ""
    raw_path: str = ""
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""


@dataclass(frozen=True)
class IP:
    """An IPv4 (``bits == 32``) or IPv6 (``bits == 128``) address without zone (``net.IP``)."""

    value: int
    bits: int


@dataclass(frozen=True)
class CIDR:
    """A prefix: the address as written (host bits kept) and the prefix length (``net.CIDR``)."""

    ip: IP
    prefix_length: int


@dataclass(frozen=True)
class NamedFormat:
    """One of the Kubernetes named string formats (``format.dns1123Label()`` ...).

    ``validate`` returns the list of problems (empty when the string is valid);
    ``max_regex_size`` feeds the cost estimate of ``validate``.
    """

    name: str
    validate: Callable[[str], list[str]] = field(compare=False, hash=False, repr=False)
    max_regex_size: int = field(compare=False)
