"""Reading the openb trace's CSV files: Alibaba cluster-trace-gpu-v2023, the data of the ATC '23
paper "Beware of Fragmentation" (Weng et al.).

One reader for everyone who turns the trace into objects: the simulator's replay adapter
(``kubesched.simulate.inputs.openb``) and the live differential's cluster builder
(``kubesched.testing.openb``). It yields rows and parses their cells; what a row becomes is the
caller's. Every error is one line naming the file, the row (``path:line``, the header is line 1),
the row's node or task name and the column.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

__all__ = ["NODE_COLUMNS", "NODE_LIST", "POD_COLUMNS", "POD_LIST", "OpenbCsvError", "OpenbRow", "read_rows"]

NODE_LIST = "openb_node_list_all_node.csv"
POD_LIST = "openb_pod_list_default.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: The task columns a replay reads (the live differential needs only the first six).
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time",
               "deletion_time", "scheduled_time")


#: What a numeric cell parses to.
Number = TypeVar("Number", int, float)


class OpenbCsvError(ValueError):
    """A trace file that cannot be read; the message names the file, the row and the column."""


@dataclass(frozen=True, slots=True)
class OpenbRow:
    path: Path
    #: Line in the file (the header is line 1).
    line: int
    cells: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def text(self, column: str) -> str:
        """The cell, stripped ('' when empty)."""
        return (self.cells.get(column) or "").strip()

    def name(self, column: str, what: str = "") -> str:
        """A cell that must not be empty (a node's ``sn``, a task's ``name``)."""
        text = self.text(column)
        if not text:
            raise OpenbCsvError(f"{self.where}: {column}{f' ({what})' if what else ''} is empty")
        return text

    def number(self, column: str, empty: float | None = None) -> float:
        """A non-negative number; an empty cell is ``empty`` when given."""
        text = self.text(column)
        if not text and empty is not None:
            return empty
        return self._non_negative(column, text, float, "a number")

    def integer(self, column: str) -> int:
        """A non-negative integer."""
        return self._non_negative(column, self.text(column), int, "an integer")

    def _non_negative(self, column: str, text: str, parse: Callable[[str], Number], what: str) -> Number:
        try:
            value = parse(text)
        except ValueError:
            raise self._bad(column, f"must be {what}, got {text!r}") from None
        if value < 0:
            raise self._bad(column, f"must not be negative, got {text!r}")
        return value

    def _bad(self, column: str, problem: str) -> OpenbCsvError:
        return OpenbCsvError(f"{self.where} ({self.cells.get('name') or self.cells.get('sn')}): {column} {problem}")


def read_rows(path: Path, columns: Sequence[str]) -> Iterator[OpenbRow]:
    """The rows of ``path``, after checking its header has every one of ``columns``."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise OpenbCsvError(f"{path}: missing column {missing[0]!r} (expected {', '.join(columns)})")
            for line, cells in enumerate(reader, start=2):
                yield OpenbRow(path, line, cells)
    except OSError as e:
        raise OpenbCsvError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise OpenbCsvError(f"{path}: not UTF-8 text at offset {e.start}") from None
