"""Tables mirror k8s.io/apimachinery/pkg/api/resource/quantity_test.go (TestQuantityParse,
TestQuantityRoundUp, TestScaledValue, TestNewSet, TestMilliNewSet) and suffix_test.go."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from kubesched.api.quantity import (
    INT64_MAX,
    QuantityError,
    format_bytes,
    format_milli_cpu,
    milli_value,
    parse_quantity,
    round_up_to_milli,
    value,
)

KI, MI, GI, TI, PI, EI = (1 << 10), (1 << 20), (1 << 30), (1 << 40), (1 << 50), (1 << 60)


def dec(i: int, exponent: int) -> F:
    return F(i) * F(10) ** exponent


# TestQuantityParse: input -> exact value.
PARSE_TABLE: list[tuple[str, F]] = [
    ("0", dec(0, 0)),
    ("0n", dec(0, 0)),
    ("0u", dec(0, 0)),
    ("0m", dec(0, 0)),
    ("0Ki", dec(0, 0)),
    ("0k", dec(0, 0)),
    ("0Mi", dec(0, 0)),
    ("0M", dec(0, 0)),
    ("0Gi", dec(0, 0)),
    ("0G", dec(0, 0)),
    ("0Ti", dec(0, 0)),
    ("0T", dec(0, 0)),
    ("1", dec(1, 0)),
    # Binary suffixes
    ("1Ki", F(KI)),
    ("8Ki", F(8 * KI)),
    ("7Mi", F(7 * MI)),
    ("6Gi", F(6 * GI)),
    ("5Ti", F(5 * TI)),
    ("4Pi", F(4 * PI)),
    ("3Ei", F(3 * EI)),
    ("10Ti", F(10 * TI)),
    ("100Ti", F(100 * TI)),
    # Decimal suffixes
    ("5n", dec(5, -9)),
    ("4u", dec(4, -6)),
    ("3m", dec(3, -3)),
    ("9", dec(9, 0)),
    ("8k", dec(8, 3)),
    ("50k", dec(5, 4)),
    ("7M", dec(7, 6)),
    ("6G", dec(6, 9)),
    ("5T", dec(5, 12)),
    ("40T", dec(4, 13)),
    ("300T", dec(3, 14)),
    ("2P", dec(2, 15)),
    ("1E", dec(1, 18)),
    # Decimal exponents
    ("1E-3", dec(1, -3)),
    ("1e3", dec(1, 3)),
    ("1E6", dec(1, 6)),
    ("1e9", dec(1, 9)),
    ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)),
    ("1E18", dec(1, 18)),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14)),
    ("1e13", dec(1, 13)),
    ("100.035k", dec(100035, 0)),
    # Things that look like floating point
    ("0.001", dec(1, -3)),
    ("0.0005k", dec(5, -1)),
    ("0.005", dec(5, -3)),
    ("0.05", dec(5, -2)),
    ("0.5", dec(5, -1)),
    ("0.00050k", dec(5, -1)),
    ("0.00500", dec(5, -3)),
    ("0.05000", dec(5, -2)),
    ("0.50000", dec(5, -1)),
    ("0.5e0", dec(5, -1)),
    ("0.5e-1", dec(5, -2)),
    ("0.5e-2", dec(5, -3)),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)),
    ("1.3E+6", dec(13, 5)),
    ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)),
    ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)),
    ("8.1k", dec(81, 2)),
    ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)),
    ("5.444T", dec(5444, 9)),
    ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)),
    ("2.5P", dec(25, 14)),
    ("1.01E", dec(101, 16)),
    # Things that saturate/round
    ("3.001n", dec(4, -9)),
    ("1.1E-9", dec(2, -9)),
    ("0.0000000001", dec(1, -9)),
    ("0.0000000005", dec(1, -9)),
    ("0.00000000050", dec(1, -9)),
    ("0.5e-9", dec(1, -9)),
    ("0.9n", dec(1, -9)),
    ("0.00000012345", dec(124, -9)),
    ("0.00000012354", dec(124, -9)),
    ("9Ei", F(INT64_MAX)),
    ("9223372036854775807Ki", F(INT64_MAX)),
    ("12E", dec(12, 18)),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2)),
    ("0.5Mi", F(MI // 2)),
    ("0.05Gi", dec(536870912, -1)),
    ("0.025Ti", dec(274877906944, -1)),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9)),
    (".001", dec(1, -3)),
    (".0001k", dec(100, -3)),
    ("1.", dec(1, 0)),
    ("1.G", dec(1, 9)),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE)
def test_parse_table(text: str, expected: F) -> None:
    assert parse_quantity(text) == expected
    # upstream also checks the explicit "+" and the negated form of every entry
    assert parse_quantity("+" + text) == expected
    assert parse_quantity("-" + text) == -expected


# TestQuantityParse "invalid", plus cases the scanner rejects.
INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "1.2.3",
    "12x",
    "1K",
    "1Kib",
    "--1",
    "1e",
    "1e2147483648",  # suffix_test.go: exponent must fit int32
    "1E-2147483649",
    "9999999999999999999",  # 19 digits over int64 on the int64 fast path -> ErrNumeric
    "e-20",  # inf.Dec path needs at least one digit
    "\u0661",  # non-ASCII digit
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError) as ei:
        parse_quantity(text)
    assert f'"{text}"' in str(ei.value)
    assert isinstance(ei.value, ValueError)


def test_error_messages() -> None:
    with pytest.raises(QuantityError, match=r'^invalid quantity "12x": unknown suffix "x"$'):
        parse_quantity("12x")
    with pytest.raises(QuantityError, match=r'^invalid quantity "": empty string$'):
        parse_quantity("")
    with pytest.raises(QuantityError, match="unable to parse numeric part"):
        parse_quantity("9999999999999999999")


# TestParseQuantityString: the scanner accepts these oddities; so does ParseQuantity.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (".", F(0)),
        ("-.", F(0)),
        ("+", F(0)),
        ("-", F(0)),
        ("Ki", F(0)),  # bare suffix: numerator reads as "0"
        ("m", F(0)),
        ("e3", F(0)),
        ("000", F(0)),
        ("0001.5", F(3, 2)),
        ("1E-3", F(1, 1000)),
        ("99999999999999999999", F(99999999999999999999)),  # 20 digits: inf.Dec path
        ("1e-2147483648", dec(1, -9)),  # below 1n rounds up to 1n
    ],
)
def test_scanner_oddities(text: str, expected: F) -> None:
    assert parse_quantity(text) == expected


# TestQuantityRoundUp at Milli scale (what SetDefaults_ResourceList does).
@pytest.mark.parametrize(
    ("text", "expected"),
    [("9.01", dec(901, -2)), ("-9.01", dec(-901, -2)), ("1.0001", dec(1001, -3)), ("-1.0001", dec(-1001, -3))],
)
def test_round_up_to_milli(text: str, expected: F) -> None:
    assert round_up_to_milli(parse_quantity(text)) == expected


# MilliValue / Value, including TestScaledValue (NewScaledQuantity(1, from).ScaledValue(to)).
@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("1n", 1, 1),
        ("1u", 1, 1),
        ("1m", 1, 1),
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("1500m", 1500, 2),
        ("0.5", 500, 1),
        ("1.5Gi", 1610612736000, 1610612736),
        ("0.1m", 1, 1),
        ("2", 2000, 2),
        ("1Mi", 1048576000, 1048576),
        ("1e-3", 1, 1),
        ("100.035Ki", 102435840, 102436),
        ("12E", INT64_MAX, INT64_MAX),  # saturates
        ("9Ei", INT64_MAX, INT64_MAX),
        ("1e300", INT64_MAX, INT64_MAX),
        # negatives: int64Amount path rounds away from zero
        ("-1.5", -1500, -2),
        ("-0.1m", -1, -1),
        # ...but the inf.Dec path (fractional binary SI) computes trunc(x)+1
        ("-100.035Ki", -102435840, -102434),
        ("-9Ei", -(2**63), -INT64_MAX),
    ],
)
def test_milli_value_and_value(text: str, milli: int, units: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == units


def test_fraction_inputs() -> None:
    assert milli_value(F(1, 3)) == 334
    assert value(F(1, 3)) == 1
    assert value(F(-1, 3)) == -1
    assert milli_value(F(2)) == 2000


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(1, F(1)), (0, F(0)), (-5, F(-5)), (0.5, F(1, 2)), (0.1, F(1, 10)), (1e-05, F(1, 100000)), (1e20, F(10**20))],
)
def test_json_numbers(raw: int | float, expected: F) -> None:
    assert parse_quantity(raw) == expected


@pytest.mark.parametrize("raw", [True, False, float("nan"), float("inf"), None, [1], {"a": 1}])
def test_non_quantities_rejected(raw: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)  # type: ignore[arg-type]


def test_json_semantics() -> None:
    # UnmarshalJSON trims whitespace (TestJSONWhitespace) and maps null to zero.
    assert parse_quantity(" 1", from_json=True) == 1
    assert parse_quantity("1 ", from_json=True) == 1
    assert parse_quantity(" -1", from_json=True) == -1
    assert parse_quantity(None, from_json=True) == 0  # type: ignore[arg-type]
    assert milli_value(" 250m ", from_json=True) == 250
    with pytest.raises(QuantityError):
        parse_quantity(" 1")


def test_cached_paths_agree() -> None:
    for text in ("100m", "1Gi", "3.001n", "-100.035Ki"):
        assert milli_value(text) == milli_value(text)
        assert value(text) == value(text)
    assert milli_value(1) == 1000
    assert milli_value(1.0) == 1000
    with pytest.raises(QuantityError):
        milli_value(True)


@pytest.mark.parametrize(("m", "text"), [(0, "0"), (100, "100m"), (1000, "1"), (2000, "2"), (1500, "1500m")])
def test_format_milli_cpu(m: int, text: str) -> None:
    assert format_milli_cpu(m) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0"), (GI, "1Gi"), (1536 * MI, "1536Mi"), (1000, "1000"), (KI, "1Ki"), (3 * EI, "3Ei"), (-MI, "-1Mi")],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text
