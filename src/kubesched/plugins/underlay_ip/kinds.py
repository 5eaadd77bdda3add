"""UnderlayIPPool and UnderlayIPClaim (``underlay.kubesched.io/v1alpha1``): the objects an underlay
network is described with, parsed once per object version.

The shapes follow BlueKing's ``bcs-k8s-custom-scheduler`` v3 (``BCSNetPool``: the hosts a pool
serves and its addresses; ``BCSNetIPClaim``: an address kept for a pod identity, with an expiry)
and Tencent galaxy-ipam's release policies, cut to what a scheduler needs:

* a **pool** (cluster-scoped) hands out the addresses of ``spec.cidr`` and/or ``spec.addresses``
  except ``spec.reserved`` (gateways and the like) to pods on the nodes it serves: ``spec.nodeNames``
  and/or the nodes ``spec.nodeSelector`` matches; one pool for many nodes, or one per node;
* a **claim** (namespaced) keeps an address for the pod of the same namespace and name (a
  StatefulSet pod's stable identity, as a PersistentVolumeClaim template does for volumes): the pod
  returns to its address; after the pod is gone the address stays reserved for
  ``spec.keepDuration`` (absent: as long as the claim exists), then the claim is Expired.
  ``spec.pool`` limits it to one pool, ``spec.address`` pins one address of that pool.

CRDs with OpenAPI schemas: ``deploy/crds/underlay.kubesched.io_*.yaml``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from kubesched.framework.labels import LabelSelector
from kubesched.framework.objects import ObjectKind

GROUP = "underlay.kubesched.io"
VERSION = "v1alpha1"
POOL = "UnderlayIPPool"
CLAIM = "UnderlayIPClaim"
#: A pool hands out at most this many addresses (a /16 of IPv4): its state is kept in memory.
MAX_POOL_ADDRESSES = 65_536

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnderlaySpecError(ValueError):
    """A pool or claim that cannot be used; the message names the field (callers name the object)."""


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    #: Every address the pool hands out, lowest first (canonical text), reserved ones excluded.
    addresses: tuple[str, ...]
    #: spec.reserved: never handed out, whatever the status says.
    reserved: frozenset[str]
    node_names: frozenset[str]
    node_selector: LabelSelector | None
    raw: dict[str, Any]

    def serves(self, node_name: str, labels: dict[str, str]) -> bool:
        if node_name in self.node_names:
            return True
        return self.node_selector is not None and self.node_selector.matches(labels)


@dataclass(frozen=True, slots=True)
class Claim:
    #: ``namespace/name``: also the identity of the pod it keeps an address for.
    key: str
    uid: str
    pool: str | None
    address: str | None
    #: Seconds the address stays reserved after the pod is gone; None: as long as the claim exists.
    keep_seconds: float | None
    raw: dict[str, Any]
    #: Not declared: the claim a pod of this StatefulSet (its name) has by the plugin's
    #: ``statefulSetKeepDuration``. It has no object and no status; it ends when its reservation
    #: does (the pod, coming back later, takes a new address).
    stateful_set: str | None = None


def parse_duration(text: object, field: str) -> float:
    """A Go ``time.Duration`` string (``90s``, ``1h30m``, ``0``) in seconds, as metav1.Duration."""
    if not isinstance(text, str):
        raise UnderlaySpecError(f"{field}: must be a duration string such as 10m or 24h, got {text!r}")
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnderlaySpecError(f"{field}: invalid duration {text!r} (expected e.g. 30s, 10m, 24h)")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def parse_rfc3339(text: object) -> float | None:
    for form in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(str(text), form).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


def _address(text: object, field: str) -> IPAddress:
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        raise UnderlaySpecError(f"{field}: {text!r} is not an IP address") from None


def _string_list(spec: dict[str, Any], key: str) -> list[Any]:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise UnderlaySpecError(f"spec.{key}: must be a list")
    return value


def parse_pool(raw: dict[str, Any]) -> Pool:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name") or "")
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise UnderlaySpecError("spec: must be an object")
    found: set[IPAddress] = set()
    cidr = spec.get("cidr")
    if cidr is not None:
        try:
            net = ipaddress.ip_network(str(cidr), strict=True)
        except ValueError as e:
            raise UnderlaySpecError(f"spec.cidr: {cidr!r} is not a network in CIDR notation ({e})") from None
        if net.num_addresses > MAX_POOL_ADDRESSES * 4:
            raise UnderlaySpecError(f"spec.cidr: {cidr} has more than {MAX_POOL_ADDRESSES} addresses")
        # hosts(): without the network and broadcast addresses (a /31 and /32 keep theirs, RFC 3021).
        found.update(net.hosts())
    for i, text in enumerate(_string_list(spec, "addresses")):
        found.add(_address(text, f"spec.addresses[{i}]"))
    if not found:
        raise UnderlaySpecError("spec: needs cidr or addresses")
    reserved = {_address(t, f"spec.reserved[{i}]") for i, t in enumerate(_string_list(spec, "reserved"))}
    usable = sorted(found - reserved, key=lambda a: (a.version, int(a)))
    if len(usable) > MAX_POOL_ADDRESSES:
        raise UnderlaySpecError(f"spec: {len(usable)} addresses, more than {MAX_POOL_ADDRESSES}")
    node_names = frozenset(str(n) for n in _string_list(spec, "nodeNames"))
    selector: LabelSelector | None = None
    if spec.get("nodeSelector") is not None:
        try:
            selector = LabelSelector.model_validate(spec["nodeSelector"])
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UnderlaySpecError(f"spec.nodeSelector{'.' + where if where else ''}: {first['msg']}") from None
    if not node_names and selector is None:
        raise UnderlaySpecError("spec: needs nodeNames or nodeSelector (the nodes the pool serves)")
    return Pool(name, tuple(str(a) for a in usable), frozenset(str(a) for a in reserved), node_names, selector, raw)


def parse_claim(raw: dict[str, Any]) -> Claim:
    meta = raw.get("metadata") or {}
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
    spec = raw.get("spec") or {}
    if not isinstance(spec, dict):
        raise UnderlaySpecError("spec: must be an object")
    pool = spec.get("pool")
    if pool is not None and (not isinstance(pool, str) or not pool):
        raise UnderlaySpecError(f"spec.pool: must be a pool's name, got {pool!r}")
    address = spec.get("address")
    if address is not None:
        if pool is None:
            raise UnderlaySpecError("spec.address: needs spec.pool (the pool the address belongs to)")
        address = str(_address(address, "spec.address"))
    keep = spec.get("keepDuration")
    keep_seconds = parse_duration(keep, "spec.keepDuration") if keep is not None else None
    return Claim(key, str(meta.get("uid") or ""), pool, address, keep_seconds, raw)


def _validator(parse: Any) -> Any:
    def validate(raw: dict[str, Any]) -> None:
        parse(raw)

    return validate


#: Declared by UnderlayIP. The plugin reports both kinds' status (the live leader merge-patches it).
POOL_KIND = ObjectKind(POOL, GROUP, VERSION, "underlayippools", namespaced=False, writes_status=True,
                       validate=_validator(parse_pool))
CLAIM_KIND = ObjectKind(CLAIM, GROUP, VERSION, "underlayipclaims", writes_status=True,
                        validate=_validator(parse_claim))
