"""The extender wire format: k8s.io/kube-scheduler/extender/v1 types, decoded and encoded as the
real kube-scheduler (pkg/scheduler/extender.go, Go's encoding/json) does.

The upstream structs have no JSON tags, so keys are the Go field names (``Pod``, ``Nodes``,
``NodeNames``, ``FailedNodes``, ...). On input, keys match field names case-insensitively the way
Go's decoder does (``pod`` and ``POD`` fill ``Pod``; later duplicates win; unknown keys are
ignored). On output, fields come in declaration order with upstream's casing, maps with sorted
keys, ``null`` for nil slices/maps, and strings escaped the way Go escapes them (``<``, ``>``,
``&``, U+2028 and U+2029 as ``\\u....``), so a response is byte-for-byte what a Go extender would send.

Decoding never trusts types: anything of the wrong shape raises ``WireError`` with the JSON path,
which the server answers with a 400 carrying that message in ``Error``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import orjson

from kubesched.snapshot.shapes import type_name as type_name  # wire paths are named as shapes are

#: k8s.io/kube-scheduler/extender/v1 MinExtenderPriority / MaxExtenderPriority.
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10


class WireError(ValueError):
    """A request that does not decode into the upstream type; the message names the JSON path."""


def go_fields(obj: Any, where: str, names: Sequence[str]) -> dict[str, Any]:
    """The struct fields of a JSON object, matched like Go's encoding/json: case-insensitively
    (Unicode case folding), unknown keys ignored, a later duplicate overriding an earlier one."""
    if not isinstance(obj, dict):
        raise WireError(f"{where}: expected a JSON object, got {type_name(obj)}")
    folded = {n.casefold(): n for n in names}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        name = folded.get(k.casefold())
        if name is not None:
            out[name] = v
    return out


def _optional_object(v: Any, where: str) -> dict[str, Any] | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise WireError(f"{where}: expected a JSON object or null, got {type_name(v)}")
    return v


def _string(v: Any, where: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise WireError(f"{where}: expected a string, got {type_name(v)}")
    return v


def _int64(v: Any, where: str) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        # Go decodes 1.0 into int64 only when it has no fraction; it rejects 1.5 and "1".
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            return int(v)
        raise WireError(f"{where}: expected an integer, got {type_name(v)}")
    if not -(2**63) <= v < 2**63:
        raise WireError(f"{where}: {v} overflows int64")
    return v


def parse_body(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise WireError(f"request body is not valid JSON: {e}") from None


# -- requests -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class ExtenderArgs:
    """Filter/prioritize arguments. Exactly one of ``nodes`` (nodeCacheCapable: false; the items of
    the NodeList) and ``node_names`` (nodeCacheCapable: true) is set."""

    pod: dict[str, Any]
    nodes: list[dict[str, Any]] | None
    node_names: list[str] | None


def decode_extender_args(data: Any) -> ExtenderArgs:
    f = go_fields(data, "ExtenderArgs", ("Pod", "Nodes", "NodeNames"))
    pod = _optional_object(f.get("Pod"), "Pod")
    if pod is None:
        raise WireError("Pod: required, got null or nothing")
    node_list = _optional_object(f.get("Nodes"), "Nodes")
    raw_names = f.get("NodeNames")
    if node_list is not None and raw_names is not None:
        raise WireError("Nodes and NodeNames: exactly one must be set (nodeCacheCapable decides which), got both")
    if node_list is None and raw_names is None:
        raise WireError("Nodes and NodeNames: exactly one must be set (nodeCacheCapable decides which), got neither")
    nodes: list[dict[str, Any]] | None = None
    names: list[str] | None = None
    if node_list is not None:
        items = go_fields(node_list, "Nodes", ("Items",)).get("Items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise WireError(f"Nodes.items: expected an array, got {type_name(items)}")
        for i, n in enumerate(items):
            if not isinstance(n, dict):
                raise WireError(f"Nodes.items[{i}]: expected a Node object, got {type_name(n)}")
        nodes = items
    else:
        if not isinstance(raw_names, list):
            raise WireError(f"NodeNames: expected an array of strings, got {type_name(raw_names)}")
        # One C-level pass for the common case; the per-item loop only to name the bad item.
        if not all(map(isinstance, raw_names, repeat(str))):
            for i, n in enumerate(raw_names):
                if not isinstance(n, str):
                    raise WireError(f"NodeNames[{i}]: expected a string, got {type_name(n)}")
        names = raw_names
    return ExtenderArgs(pod, nodes, names)


@dataclass(frozen=True, slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def decode_binding_args(data: Any) -> BindingArgs:
    f = go_fields(data, "ExtenderBindingArgs", ("PodName", "PodNamespace", "PodUID", "Node"))
    args = BindingArgs(
        _string(f.get("PodName"), "PodName"),
        _string(f.get("PodNamespace"), "PodNamespace"),
        _string(f.get("PodUID"), "PodUID"),
        _string(f.get("Node"), "Node"),
    )
    for field, value in (("PodName", args.pod_name), ("PodNamespace", args.pod_namespace), ("Node", args.node)):
        if not value:
            raise WireError(f"{field}: required, got an empty string")
    return args


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """One node's victims: the pods' UIDs (from Victims.Pods or MetaVictims.Pods) and PDB violations."""

    uids: tuple[str, ...]
    num_pdb_violations: int


@dataclass(slots=True)
class PreemptionArgs:
    pod: dict[str, Any]
    victims: dict[str, NodeVictims]
    #: True when the request used NodeNameToMetaVictims (nodeCacheCapable: true).
    meta: bool


def decode_preemption_args(data: Any) -> PreemptionArgs:
    f = go_fields(data, "ExtenderPreemptionArgs", ("Pod", "NodeNameToVictims", "NodeNameToMetaVictims"))
    pod = _optional_object(f.get("Pod"), "Pod")
    if pod is None:
        raise WireError("Pod: required, got null or nothing")
    full = _optional_object(f.get("NodeNameToVictims"), "NodeNameToVictims")
    meta = _optional_object(f.get("NodeNameToMetaVictims"), "NodeNameToMetaVictims")
    if full is not None and meta is not None:
        raise WireError("NodeNameToVictims and NodeNameToMetaVictims: exactly one must be set, got both")
    src, is_meta = (meta, True) if meta is not None else (full or {}, False)
    key = "NodeNameToMetaVictims" if is_meta else "NodeNameToVictims"
    victims: dict[str, NodeVictims] = {}
    for node, raw in src.items():
        where = f"{key}[{node!r}]"
        if raw is None:  # a nil *Victims: nothing to evict on that node
            victims[node] = NodeVictims((), 0)
            continue
        vf = go_fields(raw, where, ("Pods", "NumPDBViolations"))
        pods = vf.get("Pods") or []
        if not isinstance(pods, list):
            raise WireError(f"{where}.Pods: expected an array, got {type_name(pods)}")
        uids: list[str] = []
        for i, p in enumerate(pods):
            pw = f"{where}.Pods[{i}]"
            if p is None:
                continue
            if is_meta:
                uid = _string(go_fields(p, pw, ("UID",)).get("UID"), f"{pw}.UID")
            else:
                if not isinstance(p, dict):
                    raise WireError(f"{pw}: expected a Pod object, got {type_name(p)}")
                md = _optional_object(go_fields(p, pw, ("Metadata",)).get("Metadata"), f"{pw}.metadata") or {}
                uid = _string(go_fields(md, f"{pw}.metadata", ("UID",)).get("UID"), f"{pw}.metadata.uid")
            if not uid:
                raise WireError(f"{pw}: a victim needs a UID")
            uids.append(uid)
        victims[node] = NodeVictims(tuple(uids), _int64(vf.get("NumPDBViolations"), f"{where}.NumPDBViolations"))
    return PreemptionArgs(pod, victims, is_meta)


# -- responses ----------------------------------------------------------------------------------------

_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))
_GO_ESCAPES_UTF8 = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def go_json(value: Any) -> bytes:
    """JSON as Go's json.Marshal writes it: compact, in the given key order, HTML-safe escapes."""
    out = orjson.dumps(value)
    # These bytes occur only inside strings in JSON, so a plain replace is exact.
    for raw, esc in _GO_ESCAPES:
        if raw in out:
            out = out.replace(raw, esc)
    # Searching for the 3-byte sequences is most of the cost; ASCII output (node names) has none.
    if not out.isascii():
        for raw, esc in _GO_ESCAPES_UTF8:
            if raw in out:
                out = out.replace(raw, esc)
    return out


def _sorted_map(m: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if m is None else {k: m[k] for k in sorted(m)}


def encode_filter_result(
    *,
    nodes: list[dict[str, Any]] | None = None,
    node_names: list[str] | None = None,
    failed: Mapping[str, str] | None = None,
    failed_unresolvable: Mapping[str, str] | None = None,
    error: str = "",
) -> bytes:
    """ExtenderFilterResult{Nodes *v1.NodeList, NodeNames *[]string, FailedNodes,
    FailedAndUnresolvableNodes FailedNodesMap, Error string}. A v1.NodeList marshals as
    ``{"metadata":{},"items":[...]}`` (TypeMeta and ListMeta fields are all omitempty)."""
    node_list = None if nodes is None else {"metadata": {}, "items": nodes}
    return go_json(
        {
            "Nodes": node_list,
            "NodeNames": node_names,
            "FailedNodes": _sorted_map(failed),
            "FailedAndUnresolvableNodes": _sorted_map(failed_unresolvable),
            "Error": error,
        }
    )


def encode_host_priority_list(scores: Sequence[tuple[str, int]]) -> bytes:
    """HostPriorityList: ``[{"Host": name, "Score": n}, ...]`` in the request's node order."""
    return go_json([{"Host": h, "Score": s} for h, s in scores])


#: Per host name, its HostPriority entry encoded for each score 0..MaxExtenderPriority. Hosts are
#: the cluster's node names, a bounded set, so a prioritize answer is a join of cached bytes
#: instead of a dict per node plus their encoding (about half the cost at 400 nodes).
_HOST_ENTRIES: dict[str, list[bytes]] = {}
_HOST_ENTRIES_MAX = 50_000


def host_entries(host: str) -> list[bytes]:
    """``host``'s HostPriority entry, ``{"Host":...,"Score":s}`` as go_json writes it, for each
    score s in 0..MaxExtenderPriority (cached)."""
    entries = _HOST_ENTRIES.get(host)
    if entries is None:
        if len(_HOST_ENTRIES) >= _HOST_ENTRIES_MAX:
            _HOST_ENTRIES.clear()  # names churned past any real cluster's size: start over
        # One encoding per host: the entry ends in the score and "}", so the others share its head.
        head = go_json({"Host": host, "Score": 0})[: -len(b"0}")]
        entries = [head + b"%d}" % s for s in range(MAX_EXTENDER_PRIORITY + 1)]
        _HOST_ENTRIES[host] = entries
    return entries


def encode_extender_scores(hosts: Sequence[str], scores: Sequence[int] | npt.NDArray[np.integer[Any]]) -> bytes:
    """The same bytes as ``encode_host_priority_list(zip(hosts, scores))``. Scores in
    MinExtenderPriority..MaxExtenderPriority (the usual case) are joined from cached bytes; anything
    else takes the general path. An integer array is range-checked without a Python loop."""
    if len(hosts) != len(scores):
        raise ValueError(f"{len(hosts)} hosts but {len(scores)} scores")
    if not hosts:
        return b"[]"
    if isinstance(scores, np.ndarray):
        in_range = scores.min() >= MIN_EXTENDER_PRIORITY and scores.max() <= MAX_EXTENDER_PRIORITY
        scores = scores.tolist()
    else:
        in_range = min(scores) >= MIN_EXTENDER_PRIORITY and max(scores) <= MAX_EXTENDER_PRIORITY
    if not in_range:
        return encode_host_priority_list(list(zip(hosts, scores, strict=True)))
    cached = list(map(_HOST_ENTRIES.get, hosts))
    if all(cached):  # (not "None in": that compares every list with None)
        entries = cast(list[list[bytes]], cached)
    else:
        entries = [e if e is not None else host_entries(h) for h, e in zip(hosts, cached, strict=True)]
    return join_host_entries(list(map(list.__getitem__, entries, scores)))


def join_host_entries(entries: list[bytes]) -> bytes:
    """A HostPriorityList from entries made by host_entries, in order."""
    return b"[" + b",".join(entries) + b"]"


def encode_binding_result(error: str = "") -> bytes:
    return go_json({"Error": error})


def encode_preemption_result(victims: Mapping[str, NodeVictims] | None) -> bytes:
    """ExtenderPreemptionResult{NodeNameToMetaVictims map[string]*MetaVictims}; MetaVictims is
    {Pods []*MetaPod{UID}, NumPDBViolations int64}, Pods ``[]`` when empty (as upstream's
    convertToMetaVictims builds it)."""
    if victims is None:
        return go_json({"NodeNameToMetaVictims": None})
    return go_json(
        {
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": u} for u in v.uids], "NumPDBViolations": v.num_pdb_violations}
                for node, v in sorted(victims.items())
            }
        }
    )


def encode_error(verb: str, message: str) -> bytes:
    """The error body for a verb, in that verb's response shape where it has an Error field
    (filter: ExtenderFilterResult, bind: ExtenderBindingResult). HostPriorityList and
    ExtenderPreemptionResult have none upstream; they get ``{"Error": ...}`` (plus the preemption
    map as null), sent with a non-200 status so the scheduler never mistakes it for a result."""
    if verb == "filter":
        return go_json(
            {"Nodes": None, "NodeNames": None, "FailedNodes": None, "FailedAndUnresolvableNodes": None,
             "Error": message}
        )
    if verb == "preempt":
        return go_json({"NodeNameToMetaVictims": None, "Error": message})
    return go_json({"Error": message})
