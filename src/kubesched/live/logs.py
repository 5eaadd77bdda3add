"""Structured logs: ``key=value`` lines (or JSON with ``--log-format json``), verbosity like ``-v N``.

-v 0: kubesched INFO (start, sync, leadership, errors), libraries WARNING; -v 2: kubesched DEBUG
(every attempt and bind); -v 4: DEBUG everywhere (aiohttp, kubernetes_asyncio).
"""

from __future__ import annotations

import logging
import sys
import time

import orjson


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = f"ts={ts} level={record.levelname.lower()} logger={record.name} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


def configure(verbosity: int = 0, fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.WARNING)
    logging.getLogger("kubesched").setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
