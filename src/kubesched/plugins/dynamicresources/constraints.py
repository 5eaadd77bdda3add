"""A claim's device constraints: ``matchAttribute`` and ``distinctAttribute``.

Ports ``matchAttributeConstraint``, ``lookupAttribute`` (allocator_incubating.go) and
``distinctAttributeConstraint`` (constraint.go) of k8s.io/dynamic-resource-allocation/structured/
internal/incubating, v0.37.1: the allocator upstream runs in v1.37, where DRAConsumableCapacity (which
brought ``distinctAttribute``) is beta and on. A constraint names requests (``req`` covers all its
subrequests, ``req/sub`` one of them) or, naming none, applies to every device of the claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

#: An attribute's typed value: (kind, value), kind one of string, int, bool, version.
AttributeValue = tuple[str, Any]
_KINDS = ("string", "int", "bool", "version")


def lookup_attribute(driver: str, device: Mapping[str, Any], name: str) -> AttributeValue | None:
    """lookupAttribute: the fully qualified name, or the short name when the domain is the driver's."""
    attrs = device.get("attributes") or {}
    attr = attrs.get(name)
    if attr is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != driver:
            return None
        attr = attrs.get(ident)
    if not attr:
        return None
    for kind in _KINDS:
        if kind in attr:
            return kind, attr[kind]
    return None


class Constraint(Protocol):
    def add(self, request: str, subrequest: str, driver: str, device: Mapping[str, Any]) -> bool: ...

    def remove(self, request: str, subrequest: str) -> None: ...


class _NamedRequests:
    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = set(requests)
        self.attribute = attribute

    def applies(self, request: str, subrequest: str) -> bool:
        """matches: the request (or ``request/subrequest``) is named, or none is."""
        if not self.requests:
            return True
        return request in self.requests or (bool(subrequest) and f"{request}/{subrequest}" in self.requests)


class MatchAttribute(_NamedRequests):
    """matchAttributeConstraint: every device of the named requests has the same attribute value."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: AttributeValue | None = None
        self.num = 0

    def add(self, request: str, subrequest: str, driver: str, device: Mapping[str, Any]) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(driver, device, self.attribute)
        if value is None:
            return False
        if self.num == 0:
            self.value = value
        elif value != self.value:
            return False
        self.num += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.num -= 1


class DistinctAttribute(_NamedRequests):
    """distinctAttributeConstraint: no two devices of the named requests have the same attribute
    value (a device without the attribute is never added)."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[AttributeValue] = []

    def add(self, request: str, subrequest: str, driver: str, device: Mapping[str, Any]) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(driver, device, self.attribute)
        if value is None or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.values.pop()
