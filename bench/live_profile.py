"""A profile of each contender while it drains a live round (``python -m bench SchedulingBasic
--profile-seconds N``): started at the round's first bind, ``N`` seconds long, in the same round
as the figures (so what limits each contender is seen at the size measured, not in a separate run).

* kubesched: ``py-spy record --pid`` (sampled stacks of the running Python code, from outside the
  process; aggregated by bench/profile.py's ``analyse``).
* kube-scheduler: its own ``/debug/pprof/profile?seconds=N`` on the secure port (enableProfiling
  is on by default; the admin client certificate passes the delegated authorization), read with
  ``go tool pprof -top`` when a Go toolchain is on PATH or in /usr/local/go/bin.

Both samplers cost the profiled process little (pprof: SIGPROF in process; py-spy reads its
memory from another process, which itself takes some CPU on the shared cores: noted in the record).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.live import Running

PY_SPY_RATE = 50


def find_go() -> str | None:
    for cand in (shutil.which("go"), "/usr/local/go/bin/go"):
        if cand and Path(cand).exists():
            return cand
    return None


def pprof_top(go: str, profile: Path, binary: str | None, top: int = 25, cum: bool = False) -> list[dict[str, Any]]:
    """``go tool pprof -top`` of a CPU profile: flat and cumulative percentages per function,
    the highest flat first (``cum``: the highest cumulative first)."""
    argv = [go, "tool", "pprof", "-top", f"-nodecount={top}", *(["-cum"] if cum else [])]
    if binary:
        argv.append(binary)
    argv.append(str(profile))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    return parse_pprof_top(out)


_ROW = re.compile(r"^\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(.+)$")


def parse_pprof_top(text: str) -> list[dict[str, Any]]:
    """Rows of ``pprof -top`` ("flat flat% sum% cum cum% function")."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            rows.append({"function": m.group(6).strip(), "flat_percent": float(m.group(2)),
                         "cum_percent": float(m.group(5))})
    return rows


@dataclass
class Capture:
    """One capture in a background thread; ``finish`` waits for it and summarises it."""

    kind: str
    path: Path
    seconds: float
    thread: threading.Thread | None = None
    error: str = ""
    binary: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def finish(self) -> dict[str, Any]:
        if self.thread is not None:
            self.thread.join(self.seconds + 60)
        out: dict[str, Any] = {"profiler": self.kind, "seconds": self.seconds, "file": str(self.path)}
        if self.error:
            out["error"] = self.error
            return out
        if not self.path.exists() or not self.path.stat().st_size:
            out["error"] = "no profile written"
            return out
        try:
            if self.kind == "py-spy":
                from bench.profile import analyse

                out |= analyse(self.path.read_text(), top=20)
            else:
                go = find_go()
                out["top"] = pprof_top(go, self.path, self.binary) if go else []
                out["top_cum"] = pprof_top(go, self.path, self.binary, 40, cum=True) if go else []
                if not go:
                    out["error"] = "no Go toolchain to read the profile"
        except Exception as e:  # a summary that fails leaves the raw file for a look
            out["error"] = f"{type(e).__name__}: {e}"
        return out


def start(run: Running, seconds: float, out_dir: Path, tag: str) -> Capture:
    """Start profiling ``run``'s scheduler for ``seconds`` (returns at once)."""
    from bench.profile import find_py_spy

    comp = run.procs["scheduler"]
    if run.kind.startswith("kubesched"):
        cap = Capture("py-spy", out_dir / f"{tag}.pyspy.txt", seconds)
        spy = find_py_spy()
        if spy is None or not comp.pid:
            cap.error = "py-spy not found"
            return cap
        argv = [spy, "record", "--pid", str(comp.pid), "--rate", str(PY_SPY_RATE), "--duration", str(int(seconds)),
                "--format", "raw", "--output", str(cap.path), "--nonblocking"]

        def spy_run() -> None:
            try:
                subprocess.run(argv, capture_output=True, timeout=seconds + 60)
            except Exception as e:
                cap.error = f"py-spy: {e}"

        cap.thread = threading.Thread(target=spy_run, daemon=True, name=f"py-spy-{tag}")
    else:
        cap = Capture("pprof", out_dir / f"{tag}.pprof", seconds, binary=comp.argv[0])
        url = run.metrics_url.replace("/metrics", f"/debug/pprof/profile?seconds={int(seconds)}")

        def pprof_run() -> None:
            try:
                with urllib.request.urlopen(url, timeout=seconds + 30, context=run.metrics_ctx) as r:
                    cap.path.write_bytes(r.read())
            except Exception as e:
                cap.error = f"pprof: {e}"

        cap.thread = threading.Thread(target=pprof_run, daemon=True, name=f"pprof-{tag}")
    with contextlib.suppress(RuntimeError):
        cap.thread.start()
    return cap
