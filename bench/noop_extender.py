"""A scheduler extender that decides nothing, as fast as Python can answer: the benchmark's floor.

``kube-scheduler+noop-extender-cache`` runs the real kube-scheduler against this server with the
same extender configuration as ``kubesched extender`` (filter + prioritize, nodeCacheCapable).
Filter passes every node it is given; prioritize gives each of them score 0, so kube-scheduler
reads answers of the same size as from a real extender but the extender spends almost nothing.
What kube-scheduler loses with it is the cost of the extender protocol itself (two HTTP round
trips and kube-scheduler's own JSON encoding and decoding per pod), which no extender can avoid.

Minimal HTTP/1.1 on asyncio (keep-alive, Content-Length bodies), stdlib + orjson only: not a
product, a measuring stick. ``python bench/noop_extender.py --listen 127.0.0.1:8888``

``--record FILE`` (or the environment variable ``NOOP_EXTENDER_RECORD``, for runs started by the
live bench) appends every verb request as one line ``<verb>\t<body>``: the request stream
kube-scheduler really sends, which bench/extender_replay.py replays against both extenders.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any, BinaryIO

import orjson


def _names(args: Any) -> list[str]:
    if isinstance(args, dict):
        for key, value in args.items():
            if key.lower() == "nodenames" and isinstance(value, list):
                return [str(n) for n in value]
    return []


#: Where requests are recorded (--record), or None.
RECORD: BinaryIO | None = None


def answer(path: str, body: bytes) -> tuple[int, bytes]:
    if path.endswith("/readyz") or path.endswith("/healthz"):
        return 200, b"ok"
    if RECORD is not None:
        RECORD.write(path.rstrip("/").rpartition("/")[2].encode() + b"\t" + body + b"\n")
    try:
        args = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        return 400, b'{"Error":"bad JSON"}'
    names = _names(args)
    if path.endswith("/filter"):
        return 200, orjson.dumps({"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                                  "Error": ""})
    if path.endswith("/prioritize"):
        return 200, orjson.dumps([{"Host": n, "Score": 0} for n in names])
    return 404, b'{"Error":"unknown verb"}'


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            status, out = answer(path, body)
            writer.write(
                f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(out)}\r\n\r\n".encode() + out
            )
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(host: str, port: int) -> None:
    server = await asyncio.start_server(_serve_connection, host, port, backlog=1024)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="noop_extender", description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default="127.0.0.1:8888")
    ap.add_argument("--record", default=os.environ.get("NOOP_EXTENDER_RECORD"), metavar="FILE",
                    help="append each verb request to FILE as <verb>\\t<body> lines")
    args = ap.parse_args(argv)
    global RECORD
    if args.record:
        RECORD = open(args.record, "ab", buffering=0)  # noqa: SIM115 (open for the process's life, unbuffered: it is killed)
    host, _, port = args.listen.rpartition(":")
    asyncio.run(serve(host, int(port)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
