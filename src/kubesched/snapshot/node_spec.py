"""Reading a v1 Node object for the node table: allocatable quantities, taints, and whether an
update changes what node-object filters read. Errors name the node and the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.api.quantity import QuantityError, milli_value, value


class NodeSpecError(ValueError):
    """A node object that cannot be used; the message names the node and field."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        # Upstream's TaintToleration reason prints the taint as {key: value}.
        return f"{{{self.key}: {self.value}}}"


def parse_resource(node: str, name: str, raw: Any) -> int:
    # From the text, as upstream's Quantity.MilliValue()/Value() on the parsed quantity: both
    # parse and scale are cached per string (nodes of one shape repeat the same few values).
    try:
        return milli_value(raw) if name == "cpu" else value(raw)
    except QuantityError as e:
        raise NodeSpecError(f"node {node}: status.allocatable.{name}: {e}") from None


_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def node_definition_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a Node update touches what node-object filters may read: metadata (but its
    resourceVersion and managedFields), spec, status.allocatable/capacity. Status heartbeats
    (conditions, images, addresses, ...) do not count."""
    if old.get("spec") != new.get("spec"):
        return True
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    if old_status.get("allocatable") != new_status.get("allocatable") or (
        old_status.get("capacity") != new_status.get("capacity")
    ):
        return True
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    keys = (old_meta.keys() | new_meta.keys()).difference(_VOLATILE_METADATA)
    return any(old_meta.get(k) != new_meta.get(k) for k in keys)


def parse_taints(node: str, raw: Any) -> tuple[Taint, ...]:
    if not isinstance(raw, list):
        raise NodeSpecError(f"node {node}: spec.taints must be a list")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not t.get("key") or t.get("effect") not in (
            "NoSchedule", "PreferNoSchedule", "NoExecute"
        ):
            raise NodeSpecError(
                f"node {node}: spec.taints[{i}] needs a key and an effect of NoSchedule, "
                f"PreferNoSchedule or NoExecute, got {t!r}"
            )
        out.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])))
    return tuple(out)
