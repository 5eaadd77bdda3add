"""kubesched.api.validation against upstream's test tables.

* apimachinery ``pkg/util/validation/validation_test.go`` (v0.37.1): ``TestIsDNS1123Label``,
  ``TestIsDNS1123Subdomain``, ``TestIsQualifiedName``, ``TestIsValidLabelValue`` (the same cases as
  ``pkg/api/validate/content/kube_test.go`` ``TestIsLabelKey`` / ``TestIsLabelValue``);
* kubernetes ``pkg/apis/core/v1/helper/helpers_test.go`` ``TestIsNativeResource``;
* the exact messages: upstream's format strings (``RegexError``, ``MaxLenError``, ``EmptyError``) and
  ``field.Error`` rendering (``%q`` for strings).
"""

from __future__ import annotations

import pytest

from kubesched.api.validation import (
    field_invalid,
    field_not_supported,
    go_quote,
    go_value,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_extended_resource_name,
    is_native_resource,
    is_qualified_name,
    is_scalar_resource_name,
    is_valid_label_value,
    validate_extended_resource_name,
    validate_label_name,
)

# -- validation_test.go TestIsDNS1123Label ----------------------------------------------------------

DNS1123_LABEL_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a" * 63,
]
DNS1123_LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
]


@pytest.mark.parametrize("value", DNS1123_LABEL_GOOD)
def test_dns1123_label_good(value: str) -> None:
    assert is_dns1123_label(value) == []


@pytest.mark.parametrize("value", DNS1123_LABEL_BAD)
def test_dns1123_label_bad(value: str) -> None:
    assert is_dns1123_label(value)


# -- validation_test.go TestIsDNS1123Subdomain ------------------------------------------------------

DNS1123_SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a",
    "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1",
    "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2",
    "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
    "a" * 253,
]
DNS1123_SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a..b", "1.", ".1", "1..2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "A.a", "aB.a", "ab.A", "A1.a", "a1.A",
    "A.1", "aB.1", "A1.1", "1A.1",
    "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
    "a@b", "a,b", "a_b", "a;b",
    "a:b", "a%b", "a?b", "a$b",
    "a" * 254,
]


@pytest.mark.parametrize("value", DNS1123_SUBDOMAIN_GOOD)
def test_dns1123_subdomain_good(value: str) -> None:
    assert is_dns1123_subdomain(value) == []


@pytest.mark.parametrize("value", DNS1123_SUBDOMAIN_BAD)
def test_dns1123_subdomain_bad(value: str) -> None:
    assert is_dns1123_subdomain(value)


# -- validation_test.go TestIsQualifiedName (= content TestIsLabelKey) ------------------------------

QUALIFIED_NAME_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
QUALIFIED_NAME_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
]


@pytest.mark.parametrize("value", QUALIFIED_NAME_GOOD)
def test_qualified_name_good(value: str) -> None:
    assert is_qualified_name(value) == []


@pytest.mark.parametrize("value", QUALIFIED_NAME_BAD)
def test_qualified_name_bad(value: str) -> None:
    assert is_qualified_name(value)


# -- validation_test.go TestIsValidLabelValue (= content TestIsLabelValue) --------------------------

LABEL_VALUE_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "end-with-num-1",
    "1234",  # only num
    "a" * 63,  # to the limit
    "",  # empty value
]
LABEL_VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-rā.is.Māori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,  # over the limit
]


@pytest.mark.parametrize("value", LABEL_VALUE_GOOD)
def test_label_value_good(value: str) -> None:
    assert is_valid_label_value(value) == []


@pytest.mark.parametrize("value", LABEL_VALUE_BAD)
def test_label_value_bad(value: str) -> None:
    assert is_valid_label_value(value)


# -- exact messages ---------------------------------------------------------------------------------

_NAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName' or 'my.name' or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_SUBDOMAIN_REGEX = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def test_qualified_name_messages() -> None:
    assert is_qualified_name("-bad") == [_NAME_REGEX]
    # Every failed check adds its message, as upstream.
    assert is_qualified_name("") == ["name part must be non-empty", _NAME_REGEX]
    assert is_qualified_name("a" * 64) == ["name part must be no more than 63 bytes"]
    assert is_qualified_name("/simple") == ["prefix part must be non-empty"]
    assert is_qualified_name("Example.com/abc") == ["prefix part " + _SUBDOMAIN_REGEX]
    assert is_qualified_name("a" * 254 + "/abc") == ["prefix part must be no more than 253 bytes"]
    assert is_qualified_name("example.com/") == ["name part must be non-empty", _NAME_REGEX]
    assert is_qualified_name("only/one/slash") == [
        "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'MyName' or 'my.name' or '123-abc', regex used for validation "
        "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    ]
    # Lengths are Go's len(): UTF-8 bytes.
    assert "name part must be no more than 63 bytes" in is_qualified_name("ā" * 32)


def test_label_value_messages() -> None:
    regex = (
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
        "must start and end with an alphanumeric character (e.g. 'MyValue' or 'my_value' or '12345', regex "
        "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )
    assert is_valid_label_value("-x") == [regex]
    assert is_valid_label_value("a" * 64) == ["must be no more than 63 bytes"]
    assert is_valid_label_value("-" * 64) == ["must be no more than 63 bytes", regex]


def test_dns1123_messages() -> None:
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_label("A") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
        "and end with an alphanumeric character (e.g. 'my-name' or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert is_dns1123_subdomain("A") == [_SUBDOMAIN_REGEX]
    assert is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


# -- resource names (pkg/apis/core/v1/helper) --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "native"),
    [
        # helpers_test.go TestIsNativeResource
        ("pod.alpha.kubernetes.io/opaque-int-resource-foo", True),
        ("kubernetes.io/resource-foo", True),
        ("foo", True),
        ("a/b", False),
        ("", True),
    ],
)
def test_is_native_resource(name: str, native: bool) -> None:
    assert is_native_resource(name) is native


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("example.com/aaa", True),
        ("nvidia.com/gpu", True),
        ("cpu", False),  # native: no prefix
        ("kubernetes.io/something", False),  # native: kubernetes.io/ prefix
        ("subdomain.kubernetes.io/something", False),
        ("hugepages-2Mi", False),
        ("requests.example.com/x", False),  # quota prefix
        ("Example.com/x", False),  # "requests.Example.com/x" is not a qualified name
        ("example.com/" + "a" * 63, True),
        ("example.com/" + "a" * 64, False),
    ],
)
def test_is_extended_resource_name(name: str, extended: bool) -> None:
    assert is_extended_resource_name(name) is extended


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("example.com/gpu", True),
        ("hugepages-2Mi", True),
        ("kubernetes.io/batch-cpu", True),
        ("attachable-volumes-csi-x", True),
        ("cpu", False),
        ("memory", False),
        ("pods", False),
    ],
)
def test_is_scalar_resource_name(name: str, scalar: bool) -> None:
    assert is_scalar_resource_name(name) is scalar


def test_validate_extended_resource_name() -> None:
    # scheduler config validation.go validateExtendedResourceName
    path = "extenders[0].managedResources[0].name"
    assert validate_extended_resource_name("example.com/foo", path) == []
    assert validate_extended_resource_name("cpu", path) == [
        f'{path}: Invalid value: "cpu": is an invalid extended resource name'
    ]
    assert validate_extended_resource_name("-bad", path) == [f'{path}: Invalid value: "-bad": {_NAME_REGEX}']


def test_validate_label_name() -> None:
    assert validate_label_name("ok", "p") == []
    assert validate_label_name("", "p") == [
        'p: Invalid value: "": name part must be non-empty',
        f'p: Invalid value: "": {_NAME_REGEX}',
    ]


# -- field.Error rendering (util/validation/field/errors.go) ----------------------------------------


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("tab\tnl\ncr\r", r'"tab\tnl\ncr\r"'),
        ("\a\b\f\v", r'"\a\b\f\v"'),
        ("\x00\x1f\x7f", r'"\x00\x1f\x7f"'),
        ("Māori ☃", '"Māori ☃"'),  # printable runes are kept
        ("\u200b\u2028", r'"\u200b\u2028"'),  # format and separator runes are escaped
        ("\U000e0001", r'"\U000e0001"'),
    ],
)
def test_go_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_go_value_and_field_invalid() -> None:
    assert go_value(3) == "3"
    assert go_value(True) == "true"
    assert go_value(None) == "null"
    assert go_value(["a", "b"]) == '["a","b"]'
    assert field_invalid("a.b[0]", "x\ny", "bad") == 'a.b[0]: Invalid value: "x\\ny": bad'
    assert field_invalid("w", -1, "must be positive") == "w: Invalid value: -1: must be positive"
    assert field_not_supported("t", "Foo", ["A", "B"]) == 't: Unsupported value: "Foo": supported values: "A", "B"'
