"""Kubernetes ``resource.Quantity``, reproduced exactly.

Why a port and not ``float`` or ``Decimal``: draguard has to reach the *same* decision the API server,
the scheduler's DRA allocator and the CEL ``quantity`` library reach. Those all run the Go type from
``k8s.io/apimachinery/pkg/api/resource`` (quantity.go, amount.go, suffix.go, math.go, scale_int.go),
whose behaviour has many corners a plain number does not have:

* parsing rounds *up* below nano precision (``0.1n`` is ``1n``: you asked for some, you get some),
  caps binary-suffixed values at 2^63-1, and accepts oddities such as ``"."``, ``"1.G"`` or a bare ``"Mi"``
  (zero; kubernetes/apimachinery#165);
* ``String()`` emits a canonical form chosen per format (``1024Mi`` -> ``1Gi``, ``1.5`` -> ``1500m``,
  fractional binary values fall back to decimal), but returns the input verbatim when the fast parser
  judged it canonical already, so ``"+1"`` prints as ``"+1"``;
* the CEL ``isInteger()``/``asInteger()`` answers depend on the Go *representation* (an int64 mantissa
  with a base-10 scale, or an arbitrary-precision ``inf.Dec``), not on the value: ``"1536Mi"`` is an
  integer, ``"1.5Gi"`` (the same number) is not, and neither is ``"1000m"``.

So this module keeps the representation the way Go does (``_m``/``_e`` with a ``_dec`` flag saying which
Go backend holds it) and ports each operation's rules; every comparison and hash works on the exact
value with integer arithmetic only.

Deliberate differences, all on inputs where Go misbehaves:

* Go mutates operands in place (``Cmp`` and ``Add`` promote an int64 quantity to ``inf.Dec``, which
  flips a later ``AsInt64``); quantities here are immutable, so ``is_integer()`` reflects how a
  quantity was *made* (parsed, or the operation that produced it), never what it was later compared
  with.
* Work that would need more than :data:`MAX_EXACT_DIGITS` decimal digits (``"1e999999999"`` plus
  ``"1"``, or a 50 000-digit literal) raises :class:`QuantityError` instead of hanging the process, as
  Go would while it builds the power of ten. Parsing, comparing, hashing and printing such values
  stay cheap and exact.
* ``value()``/``milli_value()`` saturate at the int64 bounds on every path (Go wraps on the
  ``inf.Dec`` one), and round away from zero on every path (upstream's fix for #110653).
* Scale arithmetic is exact where Go's int32 arithmetic would wrap (exponents within 18 of
  -2^31).
* Where no suffix exists (past ``E``/``Ei``, below ``n``) String() spells the exponent out
  (``1000E`` -> ``1e21``), as upstream's TestQuantityString now expects; older releases dropped the
  suffix and printed ``1``.
* A JSON number reaches pydantic as a Python float, so digits beyond float64 precision are gone
  before this module sees them (Go parses the raw text). The API server always re-encodes
  quantities of built-in kinds as strings, so admission requests are not affected.
"""

from __future__ import annotations

import enum
import functools
import re
import sys
from fractions import Fraction
from typing import Any, Final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

__all__ = ["MAX_EXACT_DIGITS", "Format", "Quantity", "QuantityError", "quantity"]

# The three error texts of quantity.go (ErrFormatWrong, ErrNumeric, ErrSuffix), word for word, so a
# rejection reads exactly like kubectl's or the API server's.
_SPLIT_RE_STRING: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_ERR_FORMAT_WRONG: Final = "quantities must match the regular expression '" + _SPLIT_RE_STRING + "'"
_ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
_ERR_SUFFIX: Final = "unable to parse quantity's suffix"
# The CEL library's asInteger() error (apiserver/pkg/cel/library/quantity.go).
_ERR_NOT_INTEGER: Final = "cannot convert value to integer"

#: The most decimal digits an exact intermediate may have. Real quantities have a few dozen; the
#: bound only exists so a hostile object cannot make an admission request compute 10**(2**31).
MAX_EXACT_DIGITS: Final = 10_000

_MAX_INT64: Final = (1 << 63) - 1
_MIN_INT64: Final = -(1 << 63)
_MAX_INT32: Final = (1 << 31) - 1
_NANO: Final = -9
_HASH_MODULUS: Final = sys.hash_info.modulus
_POW10: Final[tuple[int, ...]] = tuple(10**i for i in range(64))


class QuantityError(ValueError):
    """A string that is not a quantity, or a conversion the quantity cannot make.

    The message is upstream's own wording (``quantities must match the regular expression ...``,
    ``unable to parse quantity's suffix``, ``cannot convert value to integer``), so errors surfaced
    to users match what ``kubectl`` and CEL would say.
    """


class Format(str, enum.Enum):  # noqa: UP042 - callers compare against plain strings and str() members
    """How a quantity prefers to be printed (the suffix family it was written with)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


# suffix.go: the suffix tables. "" is DecimalSI; "E" alone is exa, "E3"/"e3" is an exponent.
_DEC_SUFFIXES: Final[dict[str, int]] = {
    "": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip
_BIN_SUFFIXES: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_SUFFIX_OF: Final = {exp: s for s, exp in _DEC_SUFFIXES.items()}
_BIN_SUFFIX_OF: Final = {exp // 10: s for s, exp in _BIN_SUFFIXES.items()}
_EXPONENT_DIGITS: Final = re.compile(r"[+-]?[0-9]+")

# quantity.go parseQuantityString, as one scan: sign, leading zeros, integer digits, optional
# '.' and fraction digits, suffix letters, optional sign and digits. Possessive quantifiers make the
# match as greedy and as final as the Go scanner, so both accept and split exactly the same strings.
_SCAN: Final = re.compile(r"([+-]?)(0*+)([0-9]*+)(?:(\.)([0-9]*+))?+([eEinumkKMGTP]*+)([-+]?+[0-9]*+)")

# Go's unicode.IsSpace, used by UnmarshalJSON's TrimSpace: Python's str.strip() would also drop
# \x1c-\x1f, which Go keeps (and then rejects).
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


# ------------------------------------------------------------------------------------------------
# Exact integer helpers
# ------------------------------------------------------------------------------------------------


def _pow10(n: int) -> int:
    """10**n for 0 <= n, refusing sizes that would stall the process (see MAX_EXACT_DIGITS)."""
    if n < 64:
        return _POW10[n]
    if n > MAX_EXACT_DIGITS:
        raise QuantityError(
            f"quantity needs more than {MAX_EXACT_DIGITS} decimal digits to be computed exactly"
        )
    power: int = 10**n
    return power


def _fits_int64(v: int) -> bool:
    return _MIN_INT64 <= v <= _MAX_INT64


def _digits_bounds(a: int) -> tuple[int, int]:
    """Lower and upper bound of the number of decimal digits of ``a > 0``, from its bit length.

    Cheap for any size, which lets comparisons skip aligning exponents that are far apart.
    """
    b = a.bit_length()
    return (b - 1) * 30102999 // 100000000 + 1, b * 30103000 // 100000000 + 1


def _str_to_int(digits: str) -> int:
    """int(digits) without Python's 4300-digit conversion guard (callers bound the length)."""
    if len(digits) <= 4000:
        return int(digits)
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i : i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def _int_to_str(a: int) -> str:
    """str(a) for ``a >= 0`` without Python's 4300-digit conversion guard."""
    if a.bit_length() < 13000:
        return str(a)
    half = (_digits_bounds(a)[1]) // 2
    high, low = divmod(a, 10**half)
    return _int_to_str(high) + _int_to_str(low).rjust(half, "0")


def _cmp_exact(am: int, ae: int, bm: int, be: int) -> int:
    """Compare am*10**ae with bm*10**be exactly, never building a power of ten larger than the
    mantissas themselves (the role of cmpDec's magnitude bounds in amount.go)."""
    if ae == be:
        return (am > bm) - (am < bm)
    sa = (am > 0) - (am < 0)
    sb = (bm > 0) - (bm < 0)
    if sa != sb:
        return 1 if sa > sb else -1
    if sa == 0:
        return 0
    d = ae - be
    if -64 < d < 64:
        if d > 0:
            am *= _POW10[d]
        else:
            bm *= _POW10[-d]
        return (am > bm) - (am < bm)
    a, b = abs(am), abs(bm)
    alo, ahi = _digits_bounds(a)
    blo, bhi = _digits_bounds(b)
    # |x| lies in [10**(lo-1+e), 10**(hi+e)).
    if ahi + ae <= blo - 1 + be:
        return -sa
    if bhi + be <= alo - 1 + ae:
        return sa
    # Magnitudes overlap, so the exponent gap is below the mantissas' length: aligning is cheap.
    if d > 0:
        a *= 10**d
    else:
        b *= 10 ** (-d)
    return sa * ((a > b) - (a < b))


def _align(m: int, k: int) -> int:
    """m * 10**k for k >= 0; a zero needs no power at all."""
    if m == 0 or k == 0:
        return m
    return m * _pow10(k)


def _round_up_to_nano(u: int, exp: int) -> tuple[int, int]:
    """``u*10**exp`` (u > 0) rounded away from zero to a multiple of 10**-9, at scale -9.

    This is ``inf.Dec.Round(amount, 9, inf.RoundUp)`` of ParseQuantity: the result always carries
    exactly nine fractional digits, which as_approximate_float() can observe.
    """
    if exp >= _NANO:
        return u * _pow10(exp - _NANO), _NANO
    shift = _NANO - exp
    if shift > _digits_bounds(u)[1]:
        return 1, _NANO  # u < 10**shift: less than one nano, rounds up to one
    q, r = divmod(u, _pow10(shift))
    return q + (r != 0), _NANO


def _scaled_value(m: int, e: int, target: int) -> int:
    """m*10**(e-target) rounded away from zero and saturated to int64 (Quantity.ScaledValue)."""
    if m == 0:
        return 0
    d = e - target
    if d >= 0:
        if d >= 19:  # |m| >= 1, so at least 10**19: past int64 either way
            return _MAX_INT64 if m > 0 else _MIN_INT64
        v = m * _POW10[d]
    else:
        a = abs(m)
        if -d > _digits_bounds(a)[1]:
            return 1 if m > 0 else -1
        q, r = divmod(a, _pow10(-d))
        q += r != 0
        v = q if m > 0 else -q
    return min(max(v, _MIN_INT64), _MAX_INT64)


def _compact(m: int, e: int) -> tuple[int, int, bool]:
    """The tightest (mantissa, exponent, is-inf.Dec) for a value computed here with no Go original.

    Trailing zeros move into the exponent while they are fractional, so ``from_fraction(5)`` is
    the int64 amount {5, 0} (an integer to CEL) and ``from_fraction(1/2)`` is {5, -1} (not).
    """
    if m == 0:
        return 0, 0, False
    while e < 0 and m % 10 == 0:
        m //= 10
        e += 1
    while not _fits_int64(m) and m % 10 == 0:
        m //= 10
        e += 1
    return m, e, not _fits_int64(m)


# math.Pow10 as Go computes it (two table entries multiplied or divided), so that
# as_approximate_float() returns bit-for-bit what AsApproximateFloat64 returns.
_POW10_TAB: Final = tuple(float(10**i) for i in range(32))
_POW10_POS32: Final = (1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288)
_POW10_NEG32: Final = (1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320)


def _go_pow10(n: int) -> float:
    if 0 <= n <= 308:
        return _POW10_POS32[n // 32] * _POW10_TAB[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG32[-n // 32] / _POW10_TAB[-n % 32]
    return float("inf") if n > 0 else 0.0


# ------------------------------------------------------------------------------------------------
# The type
# ------------------------------------------------------------------------------------------------


class Quantity:
    """An immutable ``resource.Quantity``: exact value, preferred format, and the Go representation.

    Equality, ordering and hashing go by numeric value only (``1Gi == 1024Mi``, and the hash equals
    ``hash(q.as_fraction())``), so quantities work as dict keys and sort like numbers. ``original``
    keeps the exact input, so a parsed-then-dumped object is byte-identical to what came in.
    """

    __slots__ = ("_canon", "_dec", "_e", "_fmt", "_hash", "_json", "_m", "_original", "_s")

    _m: int  # mantissa: the value is _m * 10**_e
    _e: int  # base-10 exponent (Go's Scale; inf.Dec's scale negated)
    _dec: bool  # True where Go would hold an inf.Dec, False for its int64Amount fast path
    _fmt: Format
    _s: str  # Go's cached string: set by parse only when the input was deemed canonical
    _original: str | None  # exact input text; None: canonical(), computed on demand
    _json: int | float | None  # the JSON number it came from, to dump a number back as a number
    _canon: str | None
    _hash: int | None

    def __init__(self) -> None:
        raise TypeError("use Quantity.parse(), quantity(), from_int(), from_milli() or from_fraction()")

    @classmethod
    def _make(
        cls,
        m: int,
        e: int,
        dec: bool,
        fmt: Format,
        s: str = "",
        original: str | None = None,
        json_number: int | float | None = None,
    ) -> Quantity:
        q = object.__new__(cls)
        sa = object.__setattr__
        sa(q, "_m", m)
        sa(q, "_e", e)
        sa(q, "_dec", dec)
        sa(q, "_fmt", fmt)
        sa(q, "_s", s)
        sa(q, "_original", original)
        sa(q, "_json", json_number)
        sa(q, "_canon", None)
        sa(q, "_hash", None)
        return q

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Quantity is immutable")

    def __copy__(self) -> Quantity:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Quantity:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _restore, (self._m, self._e, self._dec, self._fmt.value, self._s, self._original, self._json)

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """ParseQuantity: every form upstream accepts, rounded and capped the way upstream does.

        Results are cached per string (quantities are immutable), because the same handful of
        strings ("1", "100m", "1Gi") recur across every object the allocator compares.
        """
        if not isinstance(text, str):
            raise TypeError(f"Quantity.parse() takes a str, not {type(text).__name__}")
        return _parse_cached(text)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """NewQuantity: the integer ``value``, an int64 amount at scale 0 when it fits one."""
        return cls._make(value, 0, not _fits_int64(value), Format(fmt))

    @classmethod
    def from_milli(cls, milli: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """NewMilliQuantity: ``milli``/1000, an int64 amount at scale -3 (so never isInteger)."""
        return cls._make(milli, -3, not _fits_int64(milli), Format(fmt))

    @classmethod
    def from_fraction(cls, value: Fraction, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """An exact rational, rounded away from zero to nano precision as parsing rounds.

        Upstream has no such constructor; the result is stored as ParseQuantity would store its
        decimal spelling (an int64 amount when the digits fit), so isInteger() is true exactly for
        integers that fit an int64.
        """
        value = Fraction(value)
        p, d = value.numerator, value.denominator
        if p == 0:
            return cls._make(0, 0, False, Format(fmt))
        n, r = divmod(abs(p) * 1_000_000_000, d)
        n += r != 0
        m, e, dec = _compact(n if p > 0 else -n, _NANO)
        return cls._make(m, e, dec, Format(fmt))

    @classmethod
    def from_json(cls, value: Any) -> Quantity:
        """A quantity as the API server's decoder reads it from JSON: a string or a number
        (ValueError naming the problem otherwise)."""
        return _validate(value)

    def _with_original(self, original: str, json_number: int | float | None) -> Quantity:
        return Quantity._make(self._m, self._e, self._dec, self._fmt, self._s, original, json_number)

    # -- attributes --------------------------------------------------------------------------------

    @property
    def original(self) -> str:
        """The exact text this was parsed from; for computed quantities, canonical()."""
        o = self._original
        return self.canonical() if o is None else o

    @property
    def format(self) -> Format:
        """The preferred format: the suffix family the quantity was written with."""
        return self._fmt

    # -- exact value -------------------------------------------------------------------------------

    def as_fraction(self) -> Fraction:
        """The exact value (raises QuantityError past MAX_EXACT_DIGITS digits)."""
        m, e = self._m, self._e
        if m == 0:
            return Fraction(0)
        if e >= 0:
            return Fraction(m * _pow10(e))
        return Fraction(m, _pow10(-e))

    def sign(self) -> int:
        """-1, 0 or 1."""
        m = self._m
        return (m > 0) - (m < 0)

    def is_zero(self) -> bool:
        return self._m == 0

    def value(self) -> int:
        """Value(): the integer value, fractions rounded away from zero, saturated to int64."""
        return _scaled_value(self._m, self._e, 0)

    def milli_value(self) -> int:
        """MilliValue(): the value in thousandths, rounded away from zero, saturated to int64."""
        return _scaled_value(self._m, self._e, -3)

    def is_integer(self) -> bool:
        """CEL ``isInteger()``, i.e. Go's ``AsInt64()`` succeeding.

        That is a statement about the int64 fast path, not about the number (amount.go AsInt64):
        an ``inf.Dec`` quantity never is one, a negative scale never is one even if the digits
        would divide out ("1000m", "1.0"), and a positive scale is one if it fits int64.
        """
        if self._dec:
            return False
        e = self._e
        if e == 0:
            return True
        if e < 0:
            return False
        m = self._m
        if m == 0:
            return True
        return e < 19 and _fits_int64(m * _POW10[e])

    def as_integer(self) -> int:
        """CEL ``asInteger()``: the int64 value, or QuantityError when is_integer() is false."""
        if not self.is_integer():
            raise QuantityError(_ERR_NOT_INTEGER)
        m, e = self._m, self._e
        return m if e == 0 or m == 0 else m * _POW10[e]

    def as_approximate_float(self) -> float:
        """AsApproximateFloat64: mantissa as float times Go's math.Pow10(exponent), so the rounding
        (and the +/-Inf past float range) is bit-for-bit upstream's."""
        m = self._m
        if m == 0:
            return 0.0
        try:
            base = float(m)
        except OverflowError:
            base = float("inf") if m > 0 else float("-inf")
        e = self._e
        return base if e == 0 else base * _go_pow10(e)

    # -- comparison --------------------------------------------------------------------------------

    def cmp(self, other: Quantity) -> int:
        """Cmp: -1, 0 or 1 by numeric value."""
        return _cmp_exact(self._m, self._e, other._m, other._e)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        if self._e == other._e:
            return self._m == other._m
        return _cmp_exact(self._m, self._e, other._m, other._e) == 0

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _cmp_exact(self._m, self._e, other._m, other._e) < 0

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _cmp_exact(self._m, self._e, other._m, other._e) <= 0

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _cmp_exact(self._m, self._e, other._m, other._e) > 0

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _cmp_exact(self._m, self._e, other._m, other._e) >= 0

    def __hash__(self) -> int:
        """Equal to ``hash(self.as_fraction())`` without building the fraction (Python's numeric
        hash is the value modulo 2**61-1, and 10 is invertible modulo that prime)."""
        h = self._hash
        if h is None:
            m = self._m
            if m == 0:
                h = 0
            else:
                h = abs(m) % _HASH_MODULUS * pow(10, self._e, _HASH_MODULUS) % _HASH_MODULUS
                if m < 0:
                    h = -h
                if h == -1:
                    h = -2
            object.__setattr__(self, "_hash", h)
        return h

    # -- arithmetic (amount.go / quantity.go Add, Sub, Mul, Neg) -----------------------------------

    def add(self, other: Quantity) -> Quantity:
        """Add: self + other, in self's format unless self is zero (then other's, as upstream)."""
        fmt = self._fmt
        if not self._dec and not other._dec:
            if self._m == 0:
                fmt = other._fmt
            r = _int64_add(self._m, self._e, other._m, other._e)
            if r is not None:
                return Quantity._make(r[0], r[1], False, fmt)
        elif self._m == 0:
            fmt = other._fmt
        m, e = _dec_add(self._m, self._e, other._m, other._e)
        return Quantity._make(m, e, True, fmt)

    def sub(self, other: Quantity) -> Quantity:
        """Sub: self - other, in self's format unless self is zero (then other's, as upstream)."""
        fmt = other._fmt if self._m == 0 else self._fmt
        if not self._dec and not other._dec and other._m != _MIN_INT64:
            # -MinInt64 does not fit an int64; upstream then takes the inf.Dec path.
            r = _int64_add(self._m, self._e, -other._m, other._e)
            if r is not None:
                return Quantity._make(r[0], r[1], False, fmt)
        m, e = _dec_add(self._m, self._e, -other._m, other._e)
        return Quantity._make(m, e, True, fmt)

    def mul_int(self, n: int) -> Quantity:
        """Mul(int64): exact; stays on the int64 path exactly when upstream's does."""
        m, e = self._m, self._e
        if not self._dec:
            # int64Amount.Mul
            if m == 0:
                return Quantity._make(0, e, False, self._fmt)
            if n == 0:
                return Quantity._make(0, 0, False, self._fmt)
            c = m * n
            if _fits_int64(n) and _fits_int64(c):
                if e == 0:
                    return Quantity._make(c, 0, False, self._fmt)
                if e > 0:
                    if e < 19 and _fits_int64(c * _POW10[e]):
                        return Quantity._make(c, e, False, self._fmt)
                elif -e < 19 and c % _POW10[-e] == 0:
                    # upstream also demands that the product divides out the negative scale
                    return Quantity._make(c, e, False, self._fmt)
        return Quantity._make(m * n, e, True, self._fmt)

    def mul(self, other: Quantity) -> Quantity:
        """self * other, exact, then rounded away from zero to nano precision; self's format."""
        p = self._m * other._m
        if p == 0:
            return Quantity._make(0, 0, False, self._fmt)
        u, e = _round_up_to_nano(abs(p), self._e + other._e)
        m, e, dec = _compact(u if p > 0 else -u, e)
        return Quantity._make(m, e, dec, self._fmt)

    def neg(self) -> Quantity:
        """Neg: -self, same format. -MinInt64 moves to the inf.Dec path instead of wrapping."""
        m = self._m
        return Quantity._make(-m, self._e, self._dec or m == _MIN_INT64, self._fmt)

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.add(other)

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.sub(other)

    def __neg__(self) -> Quantity:
        return self.neg()

    # -- text --------------------------------------------------------------------------------------

    def canonical(self) -> str:
        """String(): the canonical form, or the input itself when upstream's parser judged the
        input canonical already (then upstream returns it verbatim, e.g. "+1" or "1.500k")."""
        if self._s:
            return self._s
        c = self._canon
        if c is None:
            c = _canonical(self._m, self._e, self._fmt)
            object.__setattr__(self, "_canon", c)
        return c

    __str__ = canonical

    def __repr__(self) -> str:
        return f"Quantity({self.original!r})"

    # -- pydantic ----------------------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """A field type that takes what UnmarshalJSON takes (a string or a number) and dumps, in
        JSON mode, exactly the value it was given, so objects round-trip byte for byte."""
        return core_schema.no_info_plain_validator_function(
            _validate,
            serialization=core_schema.plain_serializer_function_ser_schema(_serialize, when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The OpenAPI of resource.Quantity: a string, or a number (OpenAPIV3OneOfTypes).
        return {"anyOf": [{"type": "string"}, {"type": "number"}], "title": "Quantity"}


def _restore(
    m: int, e: int, dec: bool, fmt: str, s: str, original: str | None, json_number: int | float | None
) -> Quantity:
    return Quantity._make(m, e, dec, Format(fmt), s, original, json_number)


# ------------------------------------------------------------------------------------------------
# Operations on (mantissa, exponent)
# ------------------------------------------------------------------------------------------------


def _int64_add(am: int, ae: int, bm: int, be: int) -> tuple[int, int] | None:
    """int64Amount.Add (amount.go): the result at the smaller scale, or None on int64 overflow."""
    if bm == 0:
        return am, ae
    if am == 0:
        return bm, be
    if ae == be:
        c = am + bm
        return (c, ae) if _fits_int64(c) else None
    if ae > be:
        d = ae - be
        if d >= 19:
            return None
        c = am * _POW10[d]
        if not _fits_int64(c):
            return None
        c += bm
        return (c, be) if _fits_int64(c) else None
    d = be - ae
    if d >= 19:
        return None
    c = bm * _POW10[d]
    if not _fits_int64(c):
        return None
    c += am
    return (c, ae) if _fits_int64(c) else None


def _dec_add(am: int, ae: int, bm: int, be: int) -> tuple[int, int]:
    """inf.Dec Add: both aligned to the smaller exponent, no normalisation afterwards."""
    e = min(ae, be)
    return _align(am, ae - e) + _align(bm, be - e), e


def _exact_int(m: int, e: int) -> int | None:
    """m*10**e if it is an integer, else None (AsScale(0) reporting exactness)."""
    if e >= 0:
        return _align(m, e)
    a = abs(m)
    if -e > _digits_bounds(a)[1]:
        return None
    q, r = divmod(a, _pow10(-e))
    if r:
        return None
    return q if m > 0 else -q


def _canonical(m: int, e: int, fmt: Format) -> str:
    """CanonicalizeBytes (quantity.go) with AsCanonicalBytes / AsCanonicalBase1024Bytes (amount.go).

    Decimal: all factors of ten move into the exponent, which then steps down to a multiple of
    three, and the suffix names it. Binary: only integers of magnitude >= 1024 print in base 1024;
    the rest fall back to decimal. Where no suffix exists (past "E"/"Ei", below "n") the exponent
    is spelled out ("1e21"), so the string still parses back to the same value.
    """
    if m == 0:
        return "0"
    sign = "-" if m < 0 else ""
    if fmt is Format.BINARY_SI:
        if _cmp_exact(m, e, -1024, 0) > 0 and _cmp_exact(m, e, 1024, 0) < 0:
            fmt = Format.DECIMAL_SI
        else:
            n = _exact_int(m, e)
            if n is None:
                fmt = Format.DECIMAL_SI
            else:
                a, k = abs(n), 0
                while a % 1024 == 0:
                    a //= 1024
                    k += 1
                suffix = _BIN_SUFFIX_OF.get(k, "") if k > 0 else ""
                if k == 0 or suffix:
                    return sign + _int_to_str(a) + suffix
                fmt = Format.DECIMAL_EXPONENT  # past Ei: exact decimal
    digits = _int_to_str(abs(m))
    mant = digits.rstrip("0")
    exp = e + len(digits) - len(mant)
    r = exp % 3
    if r:
        mant += "0" * r
        exp -= r
    if fmt is Format.DECIMAL_SI:
        dec_suffix = _DEC_SUFFIX_OF.get(exp)
        return sign + mant + (dec_suffix if dec_suffix is not None else f"e{exp}")
    return sign + mant + (f"e{exp}" if exp else "")


# ------------------------------------------------------------------------------------------------
# Parsing (quantity.go ParseQuantity, suffix.go interpret)
# ------------------------------------------------------------------------------------------------


def _interpret(suffix: str) -> tuple[int, int, Format] | None:
    """suffix.go interpret: (base, exponent, format), or None for an unknown suffix."""
    exp = _DEC_SUFFIXES.get(suffix)
    if exp is not None:
        return 10, exp, Format.DECIMAL_SI
    exp = _BIN_SUFFIXES.get(suffix)
    if exp is not None:
        return 2, exp, Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        text = suffix[1:]
        if _EXPONENT_DIGITS.fullmatch(text) is None:
            return None
        digits = text.lstrip("+-").lstrip("0")
        if len(digits) > 10:
            return None
        value = int(digits or "0")
        if value > _MAX_INT32:
            # The exponent is stored in an int32 Scale that is later negated; upstream rejects
            # anything past +/-MaxInt32 rather than truncating it to an unrelated value.
            return None
        return 10, (-value if text[0] == "-" else value), Format.DECIMAL_EXPONENT
    return None


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(_ERR_FORMAT_WRONG)
    if text == "0":
        return Quantity._make(0, 0, False, Format.DECIMAL_SI, "0", text)

    match = _SCAN.fullmatch(text)
    if match is None:
        raise QuantityError(_ERR_FORMAT_WRONG)
    sign, zeros, num_raw, _dot, denom_raw, _letters, _tail = match.groups()
    positive = sign != "-"
    num = num_raw or "0"
    denom = denom_raw or ""
    pos = match.start(6)
    suffix = text[pos:]

    interpreted = _interpret(suffix)
    if interpreted is None:
        raise QuantityError(_ERR_SUFFIX)
    base, exponent, fmt = interpreted

    # The int64 fast path: taken when the digits surely fit (precision) and the result is at or
    # above nano scale. Its (value, scale) is what isInteger() later inspects.
    scale = 0
    mantissa = 1
    if fmt is Format.BINARY_SI:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            # upstream: 15 - len(num) - int32(float32(exponent)*3/10) - 1; the float32 is exact here
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = 18 - (len(num) + len(denom))  # math.go maxInt64Factors = 18

    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            value = int(shifted)
            result = value * mantissa
            if _fits_int64(result):
                if not positive:
                    result = -result
                # Upstream caches the input as String() when it looks canonical already.
                s = ""
                if fmt is Format.BINARY_SI:
                    if exponent % 10 == 0 and value & 0x07:
                        s = text
                elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                    s = text
                return Quantity._make(result, scale, False, fmt, s, text)

    # The inf.Dec path.
    if not (zeros or num_raw or denom):
        raise QuantityError(_ERR_NUMERIC)  # inf.Dec.SetString: no digits
    digits = num_raw + denom
    if len(digits) > MAX_EXACT_DIGITS:
        raise QuantityError(f"quantity has more than {MAX_EXACT_DIGITS} digits")
    u = _str_to_int(digits) if digits else 0
    if base == 10:
        exp = exponent - len(denom)
    else:
        u <<= exponent
        exp = -len(denom)
    if u != 0:
        u, exp = _round_up_to_nano(u, exp)
        if fmt is Format.BINARY_SI:
            if u > _MAX_INT64 * 1_000_000_000:
                u, exp = _MAX_INT64, 0  # binary quantities are capped at MaxInt64
            elif u < 1_000_000_000:
                fmt = Format.DECIMAL_SI  # 0 < |x| < 1 has no binary spelling
    return Quantity._make(u if positive else -u, exp, True, fmt, "", text)


_parse_cached: Final = functools.lru_cache(maxsize=65536)(_parse)


def quantity(text: str) -> Quantity:
    """Shorthand for Quantity.parse (the CEL spelling)."""
    return Quantity.parse(text)


# ------------------------------------------------------------------------------------------------
# pydantic
# ------------------------------------------------------------------------------------------------


def _validate(value: Any) -> Quantity:
    """UnmarshalJSON: a string (surrounding space trimmed) or a JSON number's text."""
    json_number: int | float | None = None
    if isinstance(value, str):  # first: what nearly every manifest writes
        text = value
    elif isinstance(value, Quantity):
        return value
    elif isinstance(value, bool):
        text = "true" if value else "false"  # what Go would be handed, and reject
    elif isinstance(value, int):
        text = _int_to_str(value) if value >= 0 else "-" + _int_to_str(-value)
        json_number = value
    elif isinstance(value, float):
        text = repr(value)
        json_number = value
    else:
        raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
    trimmed = text.strip(_GO_SPACE)
    try:
        q = _parse_cached(trimmed)
    except QuantityError as err:
        raise ValueError(f"invalid quantity '{text}': {err}") from None
    if len(trimmed) == len(text) and json_number is None:
        return q
    return q._with_original(text, json_number)


def _serialize(q: Quantity) -> str | int | float:
    number = q._json
    return q.original if number is None else number
