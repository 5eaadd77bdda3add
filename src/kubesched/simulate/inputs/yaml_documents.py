"""The documents of a YAML stream, as ``yaml.load_all`` returns them, in a fraction of its time.

PyYAML with libyaml parses and composes in C, but builds the Python objects in Python, through
generic machinery: a generator per mapping and sequence, a memo entry per node, a method lookup per
tag. For a dump of 50,000 nodes that construction was over half of the load. Cluster dumps use a
small part of YAML (plain maps, lists and the core scalar tags), so each composed document is built
here by one direct recursion that handles exactly that part and calls PyYAML's own scalar
constructors. A document with anything else — a merge key (``<<``), a ``=`` key, another tag
(``!!set``, ``!!binary``, a local tag, a collection with a scalar's tag), a non-scalar key, an
alias that refers to its own ancestor — or whose construction raises is built again from the same
composed node by the loader's full constructor, so the result (or the error) is exactly PyYAML's.
Aliases to finished collections share the one object, as PyYAML's memo makes them do (a stream
without any ``&`` has no anchor, hence no alias, and skips that bookkeeping).

A 5,000-node / 10,000-pod dump (23 MB): 4.6 s with ``yaml.load_all`` (CSafeLoader), 2.4 s here,
of which 2.0 s is libyaml's parsing and PyYAML's tag resolution, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """What kubectl's YAML reader (sigs.k8s.io/yaml, YAML turned into JSON) makes of a manifest:
    the safe loader (libyaml when available) with timestamps kept as strings and map keys as JSON's
    strings. YAML 1.1 reads ``on:``, ``yes:`` or ``1:`` as a bool or a number; sigs.k8s.io/yaml's
    convertToJSONableObject writes such a key as ``"true"``, ``"1"``, and refuses a null key."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        if all(k.__class__ is str for k in mapping):
            return mapping
        out: dict[str, Any] = {}
        for key, value in mapping.items():
            if key is None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found a null key", node.start_mark)
            out[_json_key(key)] = value
        return out


def _json_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return key if isinstance(key, str) else repr(key) if isinstance(key, float) else str(key)


ManifestLoader.add_constructor("tag:yaml.org,2002:timestamp", ManifestLoader.construct_yaml_str)

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_STR = "tag:yaml.org,2002:str"
#: Scalar tags built with the loader's own constructor for that tag (the implicit resolver's tags).
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")
)


class _Unsupported(Exception):
    """The document uses YAML this builder leaves to the full constructor."""


def load_documents(data: bytes | str, loader_class: type[yaml.SafeLoader]) -> Iterator[Any]:
    """What ``yaml.load_all(data, Loader=loader_class)`` yields (the same values, the same errors);
    ``loader_class`` is a SafeLoader (or CSafeLoader) subclass."""
    loader = loader_class(data)
    try:
        # Aliases need an anchor (``&name``): without a "&" anywhere, no node is shared.
        may_share = b"&" in data if isinstance(data, bytes) else "&" in data
        build = _builder(loader, may_share)
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node() said there is one
            try:
                doc = build(node)
            except (_Unsupported, yaml.YAMLError, ValueError, TypeError, RecursionError):
                doc = loader.construct_document(node)  # PyYAML's own result, or its error
            yield doc
    finally:
        loader.dispose()


def _builder(loader: Any, may_share: bool) -> Callable[[Node], Any]:
    """A function that makes of a composed document what the loader's SafeConstructor makes of it,
    or raises _Unsupported. ``may_share``: nodes may be shared (aliases), so collections are
    remembered by node."""
    scalars: dict[str, Callable[[Any, ScalarNode], Any]] = {tag: loader.yaml_constructors[tag] for tag in _SCALAR_TAGS}
    #: Collections by node id, so aliases share them; None while one is being built (an alias to
    #: it then is a cycle).
    built: dict[int, Any] = {}

    def scalar(node: ScalarNode) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag not in scalars:
            raise _Unsupported(tag)
        return scalars[tag](loader, node)

    def build(node: Node) -> Any:
        cls = node.__class__
        if cls is ScalarNode:
            return scalar(node)  # type: ignore[arg-type]
        if may_share:
            key = id(node)
            if key in built:
                done = built[key]
                if done is None:
                    raise _Unsupported("recursive alias")
                return done
            built[key] = None
        tag = node.tag
        result: Any
        if cls is MappingNode and tag == _MAP:
            result = {}
            for key_node, value_node in node.value:
                if key_node.__class__ is not ScalarNode or key_node.tag != _STR:
                    # Merge and value keys, collections as keys, keys of other tags (``on:``,
                    # ``1:``, which ManifestLoader turns into strings as kubectl does).
                    raise _Unsupported("key")
                k = key_node.value
                if value_node.__class__ is ScalarNode and value_node.tag == _STR:
                    result[k] = value_node.value
                else:
                    result[k] = build(value_node)
        elif cls is SequenceNode and tag == _SEQ:
            result = [build(item) for item in node.value]
        else:
            raise _Unsupported(tag)
        if may_share:
            built[key] = result
        return result

    def document(node: Node) -> Any:
        try:
            return build(node)
        finally:
            built.clear()

    return document
