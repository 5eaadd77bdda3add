"""Which nodes hold which container images (``status.images``), kept as upstream's cache keeps them.

Port of the image bookkeeping of pkg/scheduler/backend/cache/cache.go (addNodeImageStates,
removeNodeImageStates): per image name, the size first reported for it and the nodes that have it
(every name of an image counts, as upstream). ImageLocality scores from it. A node update touches
that node's names only, and an update that leaves ``status.images`` as it was (every heartbeat)
costs one list comparison.

One difference, on purpose: upstream hands each node a copy of the node count taken when that
node last changed, so nodes that did not change keep a stale count; here every node sees the
current count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.snapshot.shapes import type_name

Rows = npt.NDArray[np.intp]


class ImageIndex:
    __slots__ = ("_names", "_raw", "_rows", "_rows_array", "_size")

    def __init__(self) -> None:
        #: Row → the image names of that node, and the ``status.images`` they came from.
        self._names: dict[int, tuple[str, ...]] = {}
        self._raw: dict[int, Any] = {}
        #: Image name → size first reported (upstream ImageStateSummary.Size) and holding rows.
        self._size: dict[str, int] = {}
        self._rows: dict[str, set[int]] = {}
        self._rows_array: dict[str, Rows] = {}

    def __len__(self) -> int:
        """Distinct image names on all nodes."""
        return len(self._size)

    def _unchanged(self, row: int | None, images: Any) -> bool:
        return row is not None and row in self._names and images == self._raw.get(row)

    def check(self, row: int | None, images: Any) -> None:
        """Raise ValueError naming the bad field (``status.images[0].sizeBytes: ...``) if
        ``images`` cannot be stored; cheap when the node at ``row`` already has these."""
        if not self._unchanged(row, images):
            _parse(images)

    def set_node(self, row: int, images: Any) -> None:
        """Store a node's ``status.images`` (a list of ``{names: [...], sizeBytes: n}``) at
        ``row``; :meth:`check` them first."""
        if self._unchanged(row, images):
            return
        parsed = _parse(images)
        self.remove_node(row)
        names: list[str] = []
        for image_names, size in parsed:
            for name in image_names:
                holders = self._rows.get(name)
                if holders is None:
                    holders = self._rows[name] = set()
                    self._size[name] = size
                holders.add(row)
                self._rows_array.pop(name, None)
                names.append(name)
        self._names[row] = tuple(names)
        self._raw[row] = images

    def remove_node(self, row: int) -> None:
        self._raw.pop(row, None)
        for name in self._names.pop(row, ()):
            holders = self._rows.get(name)
            if holders is None:
                continue
            holders.discard(row)
            self._rows_array.pop(name, None)
            if not holders:
                # An image no node holds any more is forgotten (its size with it).
                del self._rows[name]
                del self._size[name]

    def size(self, name: str) -> int | None:
        """The image's size as upstream's cache records it (first report), or None."""
        return self._size.get(name)

    def num_nodes(self, name: str) -> int:
        holders = self._rows.get(name)
        return len(holders) if holders else 0

    def rows(self, name: str) -> Rows:
        """Rows of the nodes holding the image (cached until a holder changes)."""
        arr = self._rows_array.get(name)
        if arr is None:
            holders = self._rows.get(name)
            arr = np.fromiter(sorted(holders), dtype=np.intp) if holders else np.zeros(0, dtype=np.intp)
            self._rows_array[name] = arr
        return arr

    def names(self, row: int) -> tuple[str, ...]:
        return self._names.get(row, ())


def _parse(images: Any) -> list[tuple[list[str], int]]:
    if images is None:
        return []
    if not isinstance(images, list):
        raise ValueError(f"status.images: expected an array, got {type_name(images)}")
    out: list[tuple[list[str], int]] = []
    for i, image in enumerate(images):
        if not isinstance(image, dict):
            raise ValueError(f"status.images[{i}]: expected an object, got {type_name(image)}")
        names = image.get("names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"status.images[{i}].names: expected an array of strings, got {type_name(names)}")
        size = image.get("sizeBytes", 0)
        if isinstance(size, bool) or not isinstance(size, int):
            raise ValueError(f"status.images[{i}].sizeBytes: expected an integer, got {type_name(size)} {size!r}")
        out.append((names, size))
    return out
