"""Shape checks of the raw Node and Pod fields kubesched reads: a field of the wrong JSON type is
named (``Pod.metadata.labels: expected an object of strings, got a string``) before parsing would
fail on it with a Python error. The API server never sends such objects; hand-written dumps and
hostile or broken extender clients may. Used by the simulator's dump loader and the extender."""

from __future__ import annotations

from typing import Any


class ShapeError(ValueError):
    """A field of the wrong JSON type; the message is ``<path>: expected ..., got ...``."""


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def check_pod_shape(raw: dict[str, Any], where: str = "Pod") -> None:
    """Reject pods whose fields the plugins read have the wrong JSON types (the API server would
    never send them; a hostile or broken client might)."""
    md = raw.get("metadata")
    if not isinstance(md, dict):
        raise ShapeError(f"{where}.metadata: expected an object, got {type_name(md)}")
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        v = md.get(key)
        if v is not None and not isinstance(v, str):
            raise ShapeError(f"{where}.metadata.{key}: expected a string, got {type_name(v)}")
    for key in ("labels", "annotations"):
        _string_map(md.get(key), f"{where}.metadata.{key}")
    spec = raw.get("spec")
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise ShapeError(f"{where}.spec: expected an object, got {type_name(spec)}")
    for key in ("containers", "initContainers", "tolerations"):
        items = spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise ShapeError(f"{where}.spec.{key}: expected an array, got {type_name(items)}")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ShapeError(f"{where}.spec.{key}[{i}]: expected an object, got {type_name(item)}")
            if key != "tolerations":
                _check_container(item, f"{where}.spec.{key}[{i}]")
    for key in ("affinity", "overhead"):
        v = spec.get(key)
        if v is not None and not isinstance(v, dict):
            raise ShapeError(f"{where}.spec.{key}: expected an object, got {type_name(v)}")
    aff = spec.get("affinity") or {}
    for key, v in aff.items():
        if v is not None and not isinstance(v, dict):
            raise ShapeError(f"{where}.spec.affinity.{key}: expected an object, got {type_name(v)}")
    _string_map(spec.get("nodeSelector"), f"{where}.spec.nodeSelector")
    for key in ("schedulerName", "nodeName"):
        v = spec.get(key)
        if v is not None and not isinstance(v, str):
            raise ShapeError(f"{where}.spec.{key}: expected a string, got {type_name(v)}")


def check_node_shape(raw: dict[str, Any], where: str) -> None:
    """Reject Node objects whose fields the node table reads have the wrong JSON types."""
    md = raw.get("metadata")
    if not isinstance(md, dict):
        raise ShapeError(f"{where}.metadata: expected an object, got {type_name(md)}")
    for key in ("labels", "annotations"):
        _string_map(md.get(key), f"{where}.metadata.{key}")
    for part, fields in (("spec", ("taints",)), ("status", ("allocatable", "capacity"))):
        obj = raw.get(part)
        if obj is None:
            continue
        if not isinstance(obj, dict):
            raise ShapeError(f"{where}.{part}: expected an object, got {type_name(obj)}")
        for key in fields:
            v = obj.get(key)
            want = list if key == "taints" else dict
            if v is not None and not isinstance(v, want):
                raise ShapeError(f"{where}.{part}.{key}: expected an {'array' if want is list else 'object'}, "
                                f"got {type_name(v)}")
    unsched = (raw.get("spec") or {}).get("unschedulable")
    if unsched is not None and not isinstance(unsched, bool):
        raise ShapeError(f"{where}.spec.unschedulable: expected a boolean, got {type_name(unsched)}")


def _check_container(c: dict[str, Any], where: str) -> None:
    res = c.get("resources")
    if res is not None:
        if not isinstance(res, dict):
            raise ShapeError(f"{where}.resources: expected an object, got {type_name(res)}")
        for key in ("requests", "limits"):
            m = res.get(key)
            if m is not None and not isinstance(m, dict):
                raise ShapeError(f"{where}.resources.{key}: expected an object, got {type_name(m)}")
    ports = c.get("ports")
    if ports is not None and (not isinstance(ports, list) or not all(isinstance(p, dict) for p in ports)):
        raise ShapeError(f"{where}.ports: expected an array of objects")


def _string_map(v: Any, where: str) -> None:
    if v is None:
        return
    if not isinstance(v, dict):
        raise ShapeError(f"{where}: expected an object of strings, got {type_name(v)}")
    for k, s in v.items():
        if not isinstance(s, str):
            raise ShapeError(f"{where}[{k!r}]: expected a string, got {type_name(s)}")
