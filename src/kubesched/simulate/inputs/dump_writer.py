"""Write a cluster dump one object at a time, in a form ``simulate --cluster`` reads (inputs/dump.py).

YAML: a multi-document stream, one object per document. JSON: one ``v1`` ``List`` whose items
are written as they come (the opening and closing of the list around them), so neither form
needs the whole cluster in memory.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Literal

import orjson
import yaml

__all__ = ["DumpWriter", "Format"]

Format = Literal["yaml", "json"]

_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class DumpWriter:
    """Objects to ``out`` in ``fmt``; call :meth:`close` once after the last one."""

    def __init__(self, out: BinaryIO, fmt: Format) -> None:
        self.out = out
        self.format = fmt
        self.written = 0
        if fmt == "json":
            out.write(b'{"apiVersion":"v1","kind":"List","items":[')

    def write(self, obj: dict[str, Any]) -> None:
        if self.format == "json":
            self.out.write((b",\n" if self.written else b"\n") + orjson.dumps(obj))
        else:
            # Strings that YAML would read as another type (timestamps, "123", "true") are quoted.
            text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
            self.out.write(b"---\n" + text.encode())
        self.written += 1

    def close(self) -> None:
        if self.format == "json":
            self.out.write(b"\n]}\n")
        self.out.flush()
