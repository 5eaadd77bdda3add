"""A real Prometheus (the Debian ``prometheus`` package) on a free loopback port, scraping a small
exporter the test serves, for the real-usage plugins' integration tests.

Everything listens on 127.0.0.1 only; Prometheus runs with a generated config and a temporary
TSDB, and is stopped (terminate, then kill) by ``stop()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import aiohttp
from aiohttp import web

IN_CI = os.environ.get("CI") == "true"
INSTALL_HINT = "apt-get install -y prometheus"


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class NodeExporter:
    """Serves node-exporter-style memory metrics with a ``node`` label, values set by the test."""

    def __init__(self) -> None:
        #: node → (MemAvailable bytes, MemTotal bytes)
        self.memory: dict[str, tuple[int, int]] = {}
        self.port = 0
        self._runner: web.AppRunner | None = None

    def text(self) -> str:
        lines = [
            "# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.",
            "# TYPE node_memory_MemAvailable_bytes gauge",
        ]
        lines += [f'node_memory_MemAvailable_bytes{{node="{n}"}} {a}' for n, (a, _) in sorted(self.memory.items())]
        lines += [
            "# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.",
            "# TYPE node_memory_MemTotal_bytes gauge",
        ]
        lines += [f'node_memory_MemTotal_bytes{{node="{n}"}} {t}' for n, (_, t) in sorted(self.memory.items())]
        return "\n".join(lines) + "\n"

    async def start(self) -> None:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=self.text(), content_type="text/plain", charset="utf-8")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class PrometheusServer:
    def __init__(self, workdir: Path, scrape_target: str, scrape_interval: str = "1s") -> None:
        self.workdir = workdir
        self.target = scrape_target
        self.interval = scrape_interval
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError(f"prometheus is not installed ({INSTALL_HINT})")
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(
            "global:\n"
            f"  scrape_interval: {self.interval}\n"
            f"  evaluation_interval: {self.interval}\n"
            "scrape_configs:\n"
            "  - job_name: node\n"
            "    static_configs:\n"
            f"      - targets: ['{self.target}']\n"
        )
        self.port = free_port()
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    async def wait_for(self, query: str, samples: int, timeout: float = 60.0) -> None:
        """Until ``query`` returns at least ``samples`` samples (Prometheus up and scraped)."""
        deadline = time.monotonic() + timeout
        last = ""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {self.log_tail()}")
                try:
                    async with session.get(f"{self.url}/api/v1/query", params={"query": query}) as r:
                        body = await r.json(content_type=None)
                    n = len(body.get("data", {}).get("result", []))
                    if n >= samples:
                        return
                    last = f"{n} sample(s)"
                except (TimeoutError, aiohttp.ClientError, ValueError) as e:
                    last = repr(e)
                await asyncio.sleep(0.25)
        raise TimeoutError(f"prometheus did not answer {query!r} with {samples} samples ({last}): {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def log_tail(self, n: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        return ""
