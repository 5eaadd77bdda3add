"""Exact Kubernetes ``resource.Quantity`` parsing.

A port of ``ParseQuantity``, ``Quantity.Value`` and ``Quantity.MilliValue`` from
k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go, amount.go, math.go,
scale_int.go in kubernetes/kubernetes ``staging/src/k8s.io/apimachinery/pkg/api/resource/``).
Values are returned as exact :class:`fractions.Fraction` so that callers can add and
compare them the way upstream adds and compares ``Quantity`` objects, and only round
(``milli_value`` / ``value``) at the very end, as the scheduler does.

Upstream behaviour reproduced here, some of it surprising:

* The grammar is upstream's scanner (``parseQuantityString``), not a stricter one:
  ``"1."``, ``".5"``, ``"1.G"``, ``"."``, ``"+"``, ``"-"`` and even a bare suffix such as
  ``"Ki"``, ``"m"`` or ``"e3"`` parse (the missing number reads as 0).  ``""``,
  ``" 1"``, ``"1 "``, ``"1.2.3"``, ``"12x"``, ``"0.1mi"``, ``"1i"`` do not.
* Any non-zero value is rounded *up in magnitude* to a multiple of 1n (10^-9):
  ``"0.5n"`` is 1n, ``"0.000000000001Ki"`` is 2n.
* Binary-SI values are capped at 2^63-1 in magnitude (``"9Ei"`` == 2^63-1); decimal
  values are not (``"12E"`` == 1.2e19).
* A plain decimal mantissa with exactly 19 significant digits that does not fit an
  int64 (e.g. ``"9999999999999999999"``) is rejected ("unable to parse numeric part"),
  while 20 digits go through upstream's arbitrary-precision path and are accepted.
* Decimal exponents must fit an int32 (``"1e2147483648"`` is invalid).
* ``Value()``/``MilliValue()`` round up (ceil) for positive values.  Negative values
  depend on upstream's internal representation: away from zero when the quantity is
  held as an int64 pair (``"-1.5"`` -> Value -2), but on the ``inf.Dec`` form (fractional
  binary-SI values, >19 digits, exponents below -9) ``scaledValue`` computes
  ``trunc(x) + 1`` (``"-100.035Ki"`` = -102435.84 -> Value -102434).
  :func:`milli_value` / :func:`value` reproduce both when given the original string; a
  ``Fraction`` argument uses the int64 rule.  Results saturate at the int64 limits
  (upstream saturates on the int64 path and overflows on the ``inf.Dec`` path).

Deviation: values larger than 10^40 in magnitude (only reachable through huge decimal
exponents such as ``"1e300"``) are clamped to 10^40 so that the arithmetic stays cheap;
every integer conversion of such a value saturates to the int64 limits anyway.  A
numeric part with more than 1000 significant digits is rejected (upstream accepts it).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Final

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "INT64_MAX",
    "INT64_MIN",
    "QuantityError",
    "QuantityLike",
    "format_bytes",
    "format_milli_cpu",
    "milli_value",
    "parse_quantity",
    "round_up_to_milli",
    "value",
]

INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)

# pkg/scheduler/util: DefaultMilliCPURequest / DefaultMemoryRequest (used for NonZeroRequested).
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024

QuantityLike = str | int | float | Fraction

# Same language as upstream's hand-written scanner ``parseQuantityString``:
#   optional sign, leading zeros (stripped), integer digits, optional "." + digits,
#   then a suffix made of [eEinumkKMGTP]*, an optional sign and digits.
# Upstream documents it as splitREString = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# but the scanner is what actually runs (it accepts e.g. "." and a bare suffix).
_SCAN_RE: Final = re.compile(r"([+-]?)0*([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_NUMBER_PREFIX_RE: Final = re.compile(r"[+-]?[0-9]*(?:\.[0-9]*)?")
_INT32_RE: Final = re.compile(r"[+-]?[0-9]+")
_SPLIT_RE_STRING: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

# suffix.go: suffix -> (base, exponent).
_SUFFIXES: Final[dict[str, tuple[int, int]]] = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    "Ki": (2, 10),
    "Mi": (2, 20),
    "Gi": (2, 30),
    "Ti": (2, 40),
    "Pi": (2, 50),
    "Ei": (2, 60),
}

_NANO: Final = 10**9
_CLAMP_DIGITS: Final = 40
_CLAMP: Final = Fraction(10**_CLAMP_DIGITS)
_MAX_DIGITS: Final = 1000


class QuantityError(ValueError):
    """An invalid resource quantity.  ``quantity`` is the offending input."""

    def __init__(self, message: str, quantity: object = None) -> None:
        super().__init__(message)
        self.quantity = quantity


def _fail(s: str, reason: str) -> QuantityError:
    return QuantityError(f'invalid quantity "{s}": {reason}', s)


def _interpret_suffix(s: str, suf: str) -> tuple[int, int]:
    """suffix.go ``interpret``: known SI suffixes, else a decimal exponent e<int32>/E<int32>."""
    known = _SUFFIXES.get(suf)
    if known is not None:
        return known
    if len(suf) > 1 and suf[0] in "eE":
        digits = suf[1:]
        # strconv.ParseInt(s, 10, 32): optional sign, decimal digits, int32 range.
        if _INT32_RE.fullmatch(digits) is None:
            raise _fail(s, f'unknown suffix "{suf}"')
        exp = int(digits)
        if not -(1 << 31) <= exp < (1 << 31):
            raise _fail(s, f'exponent out of range in suffix "{suf}"')
        return 10, exp
    raise _fail(s, f'unknown suffix "{suf}"')


def _format_error(s: str) -> QuantityError:
    prefix = _NUMBER_PREFIX_RE.match(s)
    n = prefix.end() if prefix is not None else 0
    rest = s[n:]
    if n > 0 and any(c.isdigit() for c in s[:n]) and rest and "." not in rest and not rest[0].isspace():
        return _fail(s, f'unknown suffix "{rest}"')
    return _fail(s, f"quantities must match the regular expression '{_SPLIT_RE_STRING}'")


def _ceil_nano(mag: Fraction) -> Fraction:
    """inf.Dec Round(amount, Nano, RoundUp) applied to a non-negative magnitude."""
    if mag == 0:
        return mag
    scaled = mag * _NANO
    if scaled.denominator == 1:
        return mag
    return Fraction(math.ceil(scaled), _NANO)


def _parse_string(s: str) -> tuple[Fraction, bool]:
    """ParseQuantity.  Returns (exact value, held-as-inf.Dec?)."""
    if not s:
        raise _fail(s, "empty string")
    if s == "0":
        return Fraction(0), False
    m = _SCAN_RE.fullmatch(s)
    if m is None:
        raise _format_error(s)
    sign, num, denom_g, suf = m.groups()
    negative = sign == "-"
    if not num:
        num = "0"  # "if we stripped all numerator positions, always return 0"
    denom = denom_g or ""
    base, exp = _interpret_suffix(s, suf)
    significant = (num + denom).lstrip("0")
    if len(significant) > _MAX_DIGITS:
        raise _fail(s, f"numeric part longer than {_MAX_DIGITS} digits")
    digits = int(significant) if significant else 0

    if base == 10:
        precision = 19 - (len(num) + len(denom))
        scale = exp - len(denom)
        if precision >= 0 and scale >= -9:
            # int64Amount fast path: ParseInt(num+denom) must fit an int64.
            if digits > INT64_MAX:
                raise _fail(s, "unable to parse numeric part of quantity")
            return _signed(_scale10(digits, len(significant), scale), negative), False
        _require_digits(s, m.start(4))
        if digits == 0:
            return Fraction(0), True
        if len(significant) + scale <= -9:
            # Strictly below 1n in magnitude: rounds up to exactly 1n.
            return _signed(Fraction(1, _NANO), negative), True
        return _signed(_ceil_nano(_scale10(digits, len(significant), scale)), negative), True

    # Binary SI.
    if not denom:
        precision = 15 - len(num) - (exp * 3 // 10) - 1
        if precision >= 0:
            v = digits << exp
            if v <= INT64_MAX:
                return _signed(Fraction(v), negative), False
    _require_digits(s, m.start(4))
    mag = _ceil_nano(Fraction(digits << exp, 10 ** len(denom)))
    mag = min(mag, Fraction(INT64_MAX))
    return _signed(mag, negative), True


def _require_digits(s: str, suffix_start: int) -> None:
    # The inf.Dec path re-parses the numeric text with Dec.SetString, which needs a digit.
    if not any("0" <= c <= "9" for c in s[:suffix_start]):
        raise _fail(s, "unable to parse numeric part of quantity")


def _scale10(digits: int, n_digits: int, scale: int) -> Fraction:
    if digits == 0:
        return Fraction(0)
    if scale >= 0:
        if n_digits + scale > _CLAMP_DIGITS:
            return _CLAMP
        return Fraction(digits * 10**scale)
    return Fraction(digits, 10**-scale)


def _signed(mag: Fraction, negative: bool) -> Fraction:
    return -mag if negative else mag


def _coerce(raw: object, from_json: bool) -> str:
    if isinstance(raw, str):
        return raw.strip() if from_json else raw
    if isinstance(raw, bool):
        raise QuantityError(f"invalid quantity {raw!r}: expected a string or a number", raw)
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"invalid quantity {raw!r}: not a finite number", raw)
        return repr(raw)  # shortest round-tripping text, e.g. "0.1", "1e-05", "1e+20"
    raise QuantityError(f"invalid quantity {raw!r}: expected a string or a number", raw)


@lru_cache(maxsize=16384)
def _parse_cached(s: str) -> tuple[Fraction, bool]:
    return _parse_string(s)


def _parse(raw: object, from_json: bool = False) -> tuple[Fraction, bool]:
    if raw is None and from_json:
        return Fraction(0), False  # UnmarshalJSON("null") -> zero quantity
    return _parse_cached(_coerce(raw, from_json))


def parse_quantity(s: QuantityLike, *, from_json: bool = False) -> Fraction:
    """Parse a quantity exactly as upstream ``resource.ParseQuantity`` does.

    Accepts strings, and ints/floats as a JSON number would arrive (upstream's
    ``UnmarshalJSON`` parses the number's text).  A :class:`~fractions.Fraction` is
    returned unchanged.  With ``from_json=True`` the ``UnmarshalJSON`` leniencies
    apply as well: surrounding whitespace is trimmed and ``None`` (JSON ``null``) is 0.
    Raises :class:`QuantityError` for anything upstream rejects.
    """
    if isinstance(s, Fraction):
        return s
    return _parse(s, from_json)[0]


def _round_away(x: Fraction) -> int:
    if x.denominator == 1:
        return x.numerator
    return math.ceil(x) if x > 0 else math.floor(x)


def _saturate(n: int) -> int:
    return INT64_MAX if n > INT64_MAX else INT64_MIN if n < INT64_MIN else n


def _scaled(v: Fraction, factor: int, dec: bool) -> int:
    x = v * factor
    if x.denominator == 1:
        return _saturate(x.numerator)
    if not dec or x > 0:
        # int64Amount.AsScaledInt64 / negativeScaleInt64: away from zero.
        return _saturate(_round_away(x))
    # scale_int.go scaledValue on the inf.Dec form (unscaled = v * 10^9 after the parse
    # rounded it to nano scale).  Its int64 fast path computes trunc(x) + 1, which for a
    # negative x is one above ceil(x); its big.Int path (Euclidean DivMod) gives ceil(x).
    if abs(v * _NANO) < INT64_MAX:
        return _saturate(math.trunc(x) + 1)
    return _saturate(math.ceil(x))


@lru_cache(maxsize=16384)
def _scaled_cached(s: str, milli: bool) -> int:
    v, dec = _parse_cached(s)
    return _scaled(v, 1000 if milli else 1, dec)


def milli_value(q: QuantityLike, *, from_json: bool = False) -> int:
    """Upstream ``Quantity.MilliValue()``: ceil(q * 1000) away from zero, saturating at int64."""
    if isinstance(q, Fraction):
        return _scaled(q, 1000, False)
    if q is None and from_json:
        return 0
    return _scaled_cached(_coerce(q, from_json), True)


def value(q: QuantityLike, *, from_json: bool = False) -> int:
    """Upstream ``Quantity.Value()``: q rounded up away from zero, saturating at int64."""
    if isinstance(q, Fraction):
        return _scaled(q, 1, False)
    if q is None and from_json:
        return 0
    return _scaled_cached(_coerce(q, from_json), False)


def round_up_to_milli(v: Fraction) -> Fraction:
    """``Quantity.RoundUp(Milli)`` (away from zero), as ``SetDefaults_ResourceList`` applies it."""
    x = v * 1000
    if x.denominator == 1:
        return v
    return Fraction(_round_away(x), 1000)


def format_milli_cpu(m: int) -> str:
    """Millicores for display: 2000 -> "2", 1500 -> "1500m", 100 -> "100m"."""
    if m % 1000 == 0:
        return str(m // 1000)
    return f"{m}m"


_BINARY_DISPLAY: Final = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def format_bytes(n: int) -> str:
    """Bytes for display: 1073741824 -> "1Gi", 1610612736 -> "1536Mi", 1000 -> "1000"."""
    if n == 0:
        return "0"
    mag = abs(n)
    sign = "-" if n < 0 else ""
    for suffix, shift in _BINARY_DISPLAY:
        unit = 1 << shift
        if mag % unit == 0:
            return f"{sign}{mag // unit}{suffix}"
    return str(n)
