"""CEL device selectors, as DeviceClasses and ResourceClaims write them.

Port of k8s.io/dynamic-resource-allocation/cel (compile.go ``DeviceMatches``, cache.go) at v0.37.1,
evaluated with cel-python (``celpy``, a maintained CEL implementation; no evaluator is written here).
What this module adds is what Kubernetes adds to CEL for DRA:

* the ``device`` variable: ``driver``, ``attributes`` and ``capacity``, the last two keyed by domain
  (an attribute or capacity name without a domain belongs to the device's driver) and answering an
  unknown domain with an empty map, as upstream's ``newStringInterfaceMapWithDefault``, so
  ``has(device.attributes["other.example.com"].model)`` is false rather than an error;
* the Kubernetes CEL library functions DRA selectors use, registered as celpy extension functions:
  ``quantity()`` / ``isQuantity()`` and the Quantity methods ``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``sign``, ``asInteger``, ``add``, ``sub``
  (k8s.io/apiserver/pkg/cel/library/quantity.go) and ``semver()`` / ``isSemver()`` with
  ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``, ``patch``
  (library/semverlib.go). Attribute ``version`` values are Semver, capacities are Quantities.

A selector is compiled once per expression string (``compile_selector`` is cached, as upstream's
``cel.Cache``). The selector nearly every DRA driver's DeviceClass has, ``device.driver == "NAME"``,
is answered by comparing the driver's name, without building the ``device`` variable or running
celpy's interpreter (its value cannot differ: ``device.driver`` is always the slice's driver).
Not ported: ``cel.bind`` (cel-python has no Bindings extension: such an expression
is a compile error naming it), upstream's cost estimation and runtime cost limit (celpy has no cost
accounting), list-type attributes (DRAListTypeAttributes, alpha).

celpy (with lark, pendulum and dateutil: ~0.09 CPU s, and ~5 MiB of peak RSS on top of the rest
of ``kubesched run``, measured for issue 32) is imported by the first device variable built or
selector compiled (``_import_celpy``), not with this module: the DynamicResources plugin is in the
default profile, so every ``kubesched run`` would otherwise pay for it before its first bind, in
clusters with no DRA object at all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kubesched.api.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    import celpy
    from celpy import celtypes
    from celpy.celparser import CELParseError
    from celpy.evaluation import CELEvalError

#: ``device.attributes`` / ``device.capacity``: celpy's map where an unknown domain is an empty map
#: (a class deriving from celpy's, made by ``_import_celpy``).
_DomainMap: type[celtypes.MapType]


def _import_celpy() -> None:
    """Bind celpy's names in this module at first use (the module docstring says why). Everything
    below that evaluates CEL starts from ``device_variable`` or ``compile_selector``, which call this."""
    global celpy, celtypes, CELParseError, CELEvalError, _DomainMap
    if "_DomainMap" in globals():
        return
    import celpy
    from celpy import celtypes
    from celpy.celparser import CELParseError
    from celpy.evaluation import CELEvalError

    class DomainMap(celtypes.MapType):
        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    _DomainMap = DomainMap


class CelError(Exception):
    """A compile or runtime error of one expression (the message says which)."""


# -- Kubernetes CEL library types ------------------------------------------------------------------

@functools.total_ordering
class Quantity:
    """k8s.io/apiserver/pkg/cel Quantity: compared by value (``quantity("1Gi") == quantity("1024Mi")``)."""

    __slots__ = ("text", "value")

    def __init__(self, text: str, value: Fraction) -> None:
        self.text = text
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.text!r})"


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class Semver:
    """A semantic version (blang/semver ``Parse``: strict 2.0.0, build metadata ignored in order)."""

    __slots__ = ("major", "minor", "patch", "pre", "text")

    def __init__(self, text: str) -> None:
        m = _SEMVER.match(text)
        if m is None:
            raise ValueError(f"invalid semver: {text}")
        self.text = text
        self.major, self.minor, self.patch = int(m[1]), int(m[2]), int(m[3])
        self.pre: tuple[tuple[int, int | str], ...] = tuple(
            (0, int(p)) if p.isdigit() else (1, p) for p in (m[4].split(".") if m[4] else ())
        )

    def compare(self, other: Semver) -> int:
        a, b = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if self.pre == other.pre:
            return 0
        if not self.pre or not other.pre:  # a release is greater than its pre-releases
            return 1 if not self.pre else -1
        return -1 if self.pre < other.pre else 1  # (0, int) < (1, str): the tag decides first

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(str(text), parse_quantity(str(text)))
    except QuantityError as e:
        raise ValueError(f"quantities must match the regular expression: {e}") from None


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver(text: Any) -> Semver:
    return Semver(str(text))


def _is_semver(text: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_SEMVER.match(str(text)) is not None)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise TypeError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")


def _compare_to(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(a, b))


def _is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) > 0)


def _is_less_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) < 0)


def _sign(q: Any) -> celtypes.IntType:
    if not isinstance(q, Quantity):
        raise TypeError("no such overload: sign")
    return celtypes.IntType((q.value > 0) - (q.value < 0))


def _as_integer(q: Any) -> celtypes.IntType:
    if not isinstance(q, Quantity) or q.value.denominator != 1 or not -(2**63) <= q.value < 2**63:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(q.value))


def _arith(a: Any, b: Any, sign: int) -> Quantity:
    if not isinstance(a, Quantity):
        raise TypeError("no such overload")
    other = b.value if isinstance(b, Quantity) else Fraction(int(b))
    value = a.value + sign * other
    return Quantity(str(value), value)


def _version_part(name: str) -> Any:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise TypeError(f"no such overload: {name}")
        return celtypes.IntType(getattr(v, name))
    return part


#: The Kubernetes CEL library functions (receiver-style calls arrive with the receiver first).
FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "sign": _sign,
    "asInteger": _as_integer,
    "add": lambda a, b: _arith(a, b, 1),
    "sub": lambda a, b: _arith(a, b, -1),
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
}


# -- the device variable ---------------------------------------------------------------------------

def _split(name: str, driver: str) -> tuple[str, str]:
    """parseQualifiedName: ``domain/id``, or the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attr: Mapping[str, Any]) -> Any:
    """getAttributeValue: the one value of a DeviceAttribute."""
    if "int" in attr:
        return celtypes.IntType(int(attr["int"]))
    if "bool" in attr:
        return celtypes.BoolType(bool(attr["bool"]))
    if "string" in attr:
        return celtypes.StringType(str(attr["string"]))
    if "version" in attr:
        try:
            return Semver(str(attr["version"]))
        except ValueError as e:
            raise CelError(f"attribute {name}: parse semantic version: {e}") from None
    raise CelError(f"attribute {name}: unsupported attribute value")


def device_variable(driver: str, device: Mapping[str, Any]) -> celtypes.MapType:
    """The ``device`` variable for one ResourceSlice device (``spec.devices[i]``)."""
    _import_celpy()
    attributes: dict[Any, Any] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, ident = _split(str(name), driver)
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = (
            _attribute_value(str(name), attr or {}))
    capacity: dict[Any, Any] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = _split(str(name), driver)
        try:
            q = _quantity((cap or {}).get("value", "0"))
        except ValueError as e:
            raise CelError(f"capacity {name}: {e}") from None
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = q
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("attributes"): _DomainMap({k: celtypes.MapType(v) for k, v in attributes.items()}),
        celtypes.StringType("capacity"): _DomainMap({k: celtypes.MapType(v) for k, v in capacity.items()}),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
            bool(device.get("allowMultipleAllocations"))),
    })


# -- compiling and evaluating ----------------------------------------------------------------------

@functools.cache
def _environment() -> celpy.Environment:
    """Built at the first selector, not at import: building celpy's parser takes about a second,
    which every simulation (the registry imports this plugin) would otherwise pay without CEL."""
    return celpy.Environment()


_CEL_KEY_ERROR = re.compile(r"no such member in mapping: '([^']*)'")


def _error_text(err: BaseException) -> str:
    """celpy's error, said as cel-go says the common ones (``no such key: x``)."""
    text = str(err.args[0]) if err.args else str(err)
    m = _CEL_KEY_ERROR.search(text)
    if m:
        return f"no such key: {m[1]}"
    if "undeclared reference to 'bind'" in text:
        return "cel.bind is not supported by kubesched's CEL evaluator"
    return text


#: ``device.driver == "NAME"`` (either side), NAME without escapes: the DeviceClass selector.
_DRIVER_EQUALS = re.compile(r'\s*(?:device\.driver\s*==\s*"([^"\\]*)"|"([^"\\]*)"\s*==\s*device\.driver)\s*')


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: celpy.Runner | None
    #: The compile error, None when compiled.
    error: str | None = None
    #: The driver name when the expression is only ``device.driver == "NAME"``.
    driver_equals: str | None = None

    def matches_device(self, driver: str, device: Callable[[], celtypes.MapType]) -> bool:
        """``matches(device())``, for a device of ``driver``; the driver comparison needs no
        ``device`` variable."""
        if self.driver_equals is not None:
            return driver == self.driver_equals
        return self.matches(device())

    def matches(self, device: celtypes.MapType) -> bool:
        """DeviceMatches: the expression's value for this device; CelError on a runtime error or
        a result that is not a bool."""
        if self.program is None:
            raise CelError(self.error or "not compiled")
        try:
            result = self.program.evaluate({"device": device})
        except CELEvalError as e:
            raise CelError(_error_text(e)) from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError) as e:
            raise CelError(str(e)) from None
        if isinstance(result, CELEvalError):
            raise CelError(_error_text(result))
        if not isinstance(result, celtypes.BoolType | bool):
            raise CelError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return bool(result)


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile once per expression string (upstream cel.Cache.GetOrCompile)."""
    _import_celpy()
    if "cel.bind(" in expression:
        return CompiledSelector(expression, None, "cel.bind is not supported by kubesched's CEL evaluator")
    try:
        env = _environment()
        ast = env.compile(expression)
        driver = _DRIVER_EQUALS.fullmatch(expression)
        return CompiledSelector(expression, env.program(ast, functions=FUNCTIONS),
                                driver_equals=None if driver is None else (driver[1] if driver[1] is not None
                                                                           else driver[2]))
    except CELParseError as e:
        return CompiledSelector(expression, None, f"compilation failed: {str(e).splitlines()[0]}")


def enhance_runtime_error(message: str) -> str:
    """cel.EnhanceRuntimeError (k8s.io/dynamic-resource-allocation/cel/errors.go, v0.37.1): the hint
    upstream adds to a "no such key" error, word for word."""
    if "no such key:" not in message:
        return message
    return (f"{message}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
            "with has() for optional fields")
