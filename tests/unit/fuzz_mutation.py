"""What the input fuzzers share: every path into a valid document, and a Hypothesis draw that
changes or deletes a few of them (a later change may have removed the way to an earlier path)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: A drawn replacement equal to this deletes the field instead.
DELETE = "DELETE"


def field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (dict keys, list indexes) below ``value``, not the empty one."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += field_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += field_paths(v, (*prefix, i))
    return out


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and key < len(container)


def mutate(draw: st.DrawFn, doc: Any, paths: list[tuple[Any, ...]], replacement: st.SearchStrategy[Any]) -> None:
    """Change or delete (``DELETE``) one to three of ``paths`` in ``doc``, in place."""
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True)):
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key] if _has(parent, key) else None
        if _has(parent, path[-1]):
            new = draw(replacement)
            if new == DELETE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = new
