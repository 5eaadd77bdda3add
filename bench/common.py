"""Shared helpers: machine facts, process accounting from /proc, throughput sampling like
scheduler_perf's SchedulingThroughput, histogram quantiles, and the results file."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Where kubesched child processes keep their bytecode (``installed_env``).
PYCACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "kubesched-bench-pycache"


def installed_env(src: str | None = None) -> dict[str, str]:
    """The environment of a kubesched child process (``src``: its PYTHONPATH), run as an installed
    package runs: with a bytecode cache. pip writes .pyc files when it installs; a sandbox or CI job
    that sets ``PYTHONDONTWRITEBYTECODE`` would otherwise make every start compile every module it
    imports from a source tree (0.2-0.9 CPU s before the first request, measured for issue 32),
    which no installed kubesched pays. The cache is kept under ``PYCACHE``
    (``PYTHONPYCACHEPREFIX``), so measuring another checkout writes nothing into it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if src is not None:
        env["PYTHONPATH"] = src
    return env


# -- machine -----------------------------------------------------------------------------------------
def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return 0.0


def versions() -> dict[str, str]:
    import numpy as np

    import kubesched

    out = {"kubesched": kubesched.__version__, "python": platform.python_version(), "numpy": np.__version__}
    env = ROOT / "hack" / "cluster" / "versions.env"
    if env.exists():
        for line in env.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip().lower().replace("_version", "")] = v.strip()
    return out


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except Exception:
        return ""


def machine() -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "arch": platform.machine(),
        "kernel": platform.release(),
        "loadavg_start": loadavg(),
    }


def command_line() -> str:
    return "python -m bench " + " ".join(sys.argv[1:])


# -- processes ---------------------------------------------------------------------------------------
def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (its threads included), in seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of proc(5)


def proc_status_kib(pid: int, key: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmHWM: peak RSS, VmRSS: current RSS)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# -- statistics --------------------------------------------------------------------------------------
def nearest_rank(sorted_values: Sequence[float], pct: float) -> float:
    """scheduler_perf's percentile: values[ceil(n*pct/100)-1] of the sorted samples."""
    if not sorted_values:
        return 0.0
    i = max(0, math.ceil(len(sorted_values) * pct / 100) - 1)
    return float(sorted_values[min(i, len(sorted_values) - 1)])


def throughput(bind_times: Iterable[float], start: float | None = None, interval: float = 1.0) -> dict[str, Any]:
    """SchedulingThroughput from bind timestamps: pods bound in each ``interval`` window from
    ``start`` (default: the first bind) to the last bind; the trailing partial window counts only
    if it is the only one (scaled). Average is the mean of the samples (as scheduler_perf reports
    it); ``overall`` is pods / (last bind - start)."""
    times = sorted(bind_times)
    if not times:
        return {"samples": [], "average": 0.0, "perc50": 0.0, "perc90": 0.0, "perc99": 0.0, "overall": 0.0}
    t0 = times[0] if start is None else start
    span = times[-1] - t0
    full = int(span // interval)
    counts = [0] * (full + 1)
    for t in times:
        counts[min(int((t - t0) // interval), full)] += 1
    if full == 0:
        samples = [counts[0] / max(span, 1e-3) * interval] if span > 0 else [float(counts[0])]
    else:
        # the partial window after the last full one is dropped (it would understate the rate);
        # its pods still count in ``overall``.
        samples = [float(c) for c in counts[:full]]
    s = sorted(samples)
    return {
        "samples": [round(x / interval, 2) for x in samples],
        "average": round(sum(samples) / len(samples) / interval, 1),
        "perc50": round(nearest_rank(s, 50) / interval, 1),
        "perc90": round(nearest_rank(s, 90) / interval, 1),
        "perc99": round(nearest_rank(s, 99) / interval, 1),
        "overall": round(len(times) / span, 1) if span > 0 else float(len(times)),
        "span_seconds": round(span, 3),
    }


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) pairs (+Inf last)."""
    if not buckets:
        return None
    buckets = sorted(buckets)
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return buckets[-1][0]


def parse_histogram(text: str, name: str, match: Mapping[str, str]) -> list[tuple[float, float]]:
    """Cumulative buckets of histogram ``name`` summed over the series whose labels include ``match``."""
    acc: dict[float, float] = {}
    pat = re.compile(r"^" + re.escape(name) + r"_bucket\{([^}]*)\}\s+([0-9.eE+-]+|NaN|\+Inf)")
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        le = labels.get("le", "+Inf")
        bound = math.inf if le in ("+Inf", "Inf") else float(le)
        acc[bound] = acc.get(bound, 0.0) + float(m.group(2))
    return sorted(acc.items())


def median(values: Iterable[float | None]) -> float | None:
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


# -- results -----------------------------------------------------------------------------------------
def today() -> str:
    return dt.date.today().isoformat()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def save_result(record: dict[str, Any], path: Path | None = None) -> Path:
    """Append ``record`` to bench/results/<date>.json (a JSON object {"results": [...]})."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = path or RESULTS / f"{today()}.json"
    doc: dict[str, Any] = {"results": []}
    if out.exists():
        try:
            doc = json.loads(out.read_text())
        except ValueError:
            doc = {"results": []}
    doc.setdefault("results", []).append(record)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


def load_results(directory: Path = RESULTS) -> list[dict[str, Any]]:
    """Every record of bench/results/<date>.json files, oldest file first."""
    out: list[dict[str, Any]] = []
    for p in sorted(directory.glob("[0-9][0-9][0-9][0-9]-*.json")):
        try:
            doc = json.loads(p.read_text())
        except ValueError:
            continue
        for r in doc.get("results", []):
            r.setdefault("_file", p.name)
            out.append(r)
    return out
