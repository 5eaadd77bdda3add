"""The parts of an AllocationResult beyond its devices: the configuration and the node selector.

Port of the result assembly of ``Allocate`` and of ``createNodeSelector``
(k8s.io/dynamic-resource-allocation/structured/internal/incubating/allocator_incubating.go, v0.37.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class UnsupportedNodeSelectorError(ValueError):
    """A slice's node selector has more than one term (upstream's error text)."""


def claim_config(chosen: Sequence[tuple[str, str, Mapping[str, Any] | None]],
                 claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The classes' config (``FromClass``, once per class, for the requests using it) then the
    claim's (``FromClaim``, where it names a request of the claim); a config applying to every
    request loses its request list ("empty means all"). ``chosen``: per request of the claim, the
    allocated (sub)request's full name, the request's name and its class."""
    config: list[dict[str, Any]] = []
    by_class: dict[str, tuple[int, int]] = {}
    for full_name, _, cls in chosen:
        if cls is None:
            continue
        name = str((cls.get("metadata") or {}).get("name", ""))
        if name in by_class:
            start, end = by_class[name]
            for i in range(start, end):
                config[i]["requests"].append(full_name)
            continue
        start = len(config)
        for c in (cls.get("spec") or {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [full_name], **c})
        by_class[name] = (start, len(config))
    devices = (claim.get("spec") or {}).get("devices") or {}
    spec_requests = devices.get("requests") or []
    for c in devices.get("config") or []:
        wanted = list(c.get("requests") or [])
        body = {k: v for k, v in c.items() if k != "requests"}
        if not wanted:
            config.append({"source": "FromClaim", **body})
            continue
        for raw, (full_name, _, _) in zip(spec_requests, chosen, strict=False):
            if raw.get("name") in wanted or full_name in wanted:
                config.append({"source": "FromClaim", "requests": wanted, **body})
                break
    for entry in config:
        reqs = entry.get("requests")
        if reqs and all(full_name in reqs or base in reqs for full_name, base, _ in chosen):
            del entry["requests"]
    return config


def node_selector(placements: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                  node_name: str) -> dict[str, Any] | None:
    """createNodeSelector: per allocated (slice, device), a node name (or a device that binds to
    the node, ``bindsToNode``) pins the allocation to the node allocated for, else the slices' (with
    perDeviceNodeSelection, the devices') node selectors' requirements are merged into one term;
    nothing when available everywhere."""
    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for s, device in placements:
        spec = s.get("spec") or {}
        where = device if spec.get("perDeviceNodeSelection") else spec
        if where.get("nodeName") or device.get("bindsToNode") is True:
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
        terms = (where.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise UnsupportedNodeSelectorError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        if terms:
            _merge(terms[0].get("matchFields") or [], fields)
            _merge(terms[0].get("matchExpressions") or [], expressions)
    if not fields and not expressions:
        return None
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = expressions
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def _merge(source: Sequence[dict[str, Any]], into: list[dict[str, Any]]) -> None:
    """addNewNodeSelectorRequirements: requirements not already there (same key, operator, values)."""
    for req in source:
        values = set(req.get("values") or [])
        if not any(r.get("key") == req.get("key") and r.get("operator") == req.get("operator")
                   and set(r.get("values") or []) == values for r in into):
            into.append(req)
