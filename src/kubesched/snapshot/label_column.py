"""One label key across every node-table row: interned value codes, so label selectors compare
integers instead of strings (``NodeTable.label_column``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt


class LabelColumn:
    """One label key across all rows: interned value codes (-1 where the node lacks the key)."""

    __slots__ = ("_ints", "codes", "values")

    def __init__(self, capacity: int) -> None:
        self.codes = np.full(capacity, -1, dtype=np.int32)
        self.values: dict[str, int] = {}
        self._ints: npt.NDArray[np.float64] | None = None

    def code(self, value: str) -> int:
        c = self.values.get(value)
        if c is None:
            c = self.values[value] = len(self.values)
            self._ints = None
        return c

    def codes_for(self, values: Iterable[str]) -> npt.NDArray[np.int32]:
        """Codes of the given values that some node has (unknown values match nothing)."""
        return np.array([self.values[v] for v in values if v in self.values], dtype=np.int32)

    def int_values(self) -> npt.NDArray[np.float64]:
        """Per-row integer value of the label (NaN when absent or not an integer), for Gt/Lt."""
        if self._ints is None:
            lut = np.full(len(self.values) + 1, np.nan)
            for v, c in self.values.items():
                with contextlib.suppress(ValueError):
                    lut[c] = int(v)
            self._ints = lut
        return self._ints[self.codes]  # code -1 indexes the trailing NaN

    def grow(self, capacity: int) -> None:
        grown = np.full(capacity, -1, dtype=np.int32)
        grown[: len(self.codes)] = self.codes
        self.codes = grown
