"""The extender fuzzed at scale: ``python -m bench fuzz [--bodies N]`` (default 100,000).

A real `kubesched extender` process (the unit tests' UnderlayIP profile, ``--max-body`` 256 KiB)
receives the generated bodies of tests/unit/extender/test_fuzz.py over HTTP (the tests run with
``KUBESCHED_FUZZ_URL`` pointing at it and ``KUBESCHED_FUZZ_EXAMPLES`` scaled to N): malformed
requests must get a 4xx with an ``Error``, mutated valid shapes anything but a 5xx. Meanwhile its
RSS is sampled; afterwards 200 slow-loris connections (headers trickled) must all be cut off
within the header timeout while a normal request is still answered, and the answer counts are
read from its /metrics. The dump and configuration fuzzing (tests/unit/test_fuzz_inputs.py)
runs at the same scale. The record is appended to bench/results/<date>.json.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import common
from kubesched.extender.limits import HEADER_TIMEOUT
from kubesched.testing.controlplane import Component, free_port

BATCH = 4  # bodies per hypothesis example in test_fuzz.py
PROPERTIES = 2  # properties in test_fuzz.py that send bodies


def _ip_config() -> str:
    sys.path.insert(0, str(common.ROOT / "tests"))
    from unit.extender.ext_helpers import IP_CONFIG

    return IP_CONFIG


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError:
        return 0, ""


def _rss_sampler(pid: int, samples: list[tuple[float, int]], stop: threading.Event) -> None:
    t0 = time.monotonic()
    while not stop.wait(2.0):
        kib = common.proc_status_kib(pid, "VmRSS")
        if kib is not None:
            samples.append((time.monotonic() - t0, kib))


def slow_loris(port: int, connections: int = 200) -> dict[str, Any]:
    """Open ``connections`` that trickle headers and never finish; how long until each is cut."""
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT + 10)
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    t0 = time.monotonic()
    status, _ = _get(f"http://127.0.0.1:{port}/healthz")
    served_meanwhile = status == 200
    cut: list[float] = []
    for i, s in enumerate(socks):
        try:
            if i % 10 == 0:
                s.sendall(b"X-Slow: y\r\n")
            got = s.recv(1)
        except OSError:
            got = b""
        if got == b"":
            cut.append(time.monotonic() - t0)
        s.close()
    return {"connections": connections, "cut_off": len(cut), "served_meanwhile": served_meanwhile,
            "cut_after_max_s": round(max(cut), 1) if cut else None, "header_timeout_s": HEADER_TIMEOUT}


def _codes(metrics: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for code, n in re.findall(r'kubesched_extender_requests_total\{[^}]*code="(\d+)"[^}]*\} ([0-9.e+]+)', metrics):
        out[code] = out.get(code, 0) + int(float(n))
    return out


def run(bodies: int, workdir: Path) -> dict[str, Any]:
    cfg = workdir / "ip.yaml"
    cfg.write_text(_ip_config())
    port = free_port()
    ext = Component("kubesched-extender", [sys.executable, "-m", "kubesched.cli", "extender", f"--config={cfg}",
                                           f"--listen=127.0.0.1:{port}", "--max-body=262144", "--log-level=error"],
                    workdir / "extender.log").start()
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 60
        while _get(f"http://127.0.0.1:{port}/readyz")[0] != 200:
            if time.monotonic() > deadline or not ext.alive():
                raise RuntimeError(f"the extender did not start:\n{ext.tail(30)}")
            time.sleep(0.2)
        assert ext.pid is not None
        sampler = threading.Thread(target=_rss_sampler, args=(ext.pid, samples, stop), daemon=True)
        sampler.start()
        examples = max(1, bodies // (BATCH * PROPERTIES))
        env = {**os.environ, "KUBESCHED_FUZZ_URL": f"http://127.0.0.1:{port}", "KUBESCHED_FUZZ_EXAMPLES":
               str(examples)}
        t0 = time.monotonic()
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                                "tests/unit/extender/test_fuzz.py", "tests/unit/test_fuzz_inputs.py"],
                               cwd=common.ROOT, env=env, capture_output=True, text=True)
        (workdir / "fuzz-tests.log").write_text(tests.stdout + tests.stderr)  # a failing example in full
        fuzz_s = time.monotonic() - t0
        stop.set()
        loris = slow_loris(port)
        codes = _codes(_get(f"http://127.0.0.1:{port}/metrics")[1])
        alive = ext.alive()
    finally:
        stop.set()
        ext.stop()
    rss = [kib for _, kib in samples]
    warm = rss[max(0, len(rss) // 10)] if rss else None
    return {
        "benchmark": "fuzz", "date": common.now_iso(), "commit": common.git_commit(),
        "command": common.command_line(), "machine": common.machine(),
        "bodies_requested": bodies, "examples_per_property": examples,
        "requests_answered": sum(codes.values()), "answers_by_code": codes,
        "answers_5xx": sum(n for c, n in codes.items() if c.startswith("5")),
        "tests_passed": tests.returncode == 0, "tests_log": str(workdir / "fuzz-tests.log"),
        "tests_tail": tests.stdout[-1500:] + tests.stderr[-500:],
        "fuzz_seconds": round(fuzz_s, 1), "extender_alive_after": alive,
        "rss_mib": {"first": round(rss[0] / 1024, 1) if rss else None,
                    "after_10pct": round(warm / 1024, 1) if warm else None,
                    "peak": round(max(rss) / 1024, 1) if rss else None,
                    "last": round(rss[-1] / 1024, 1) if rss else None},
        "slow_loris": loris, "loadavg_end": common.loadavg(),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bodies", type=int, default=100_000)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    rec = run(args.bodies, Path(tempfile.mkdtemp(prefix="kubesched-fuzz-")))
    print({k: v for k, v in rec.items() if k not in ("machine", "tests_tail")})
    if not rec["tests_passed"]:
        print(rec["tests_tail"])
    if not args.no_save:
        print(f"results: {common.save_result(rec)}")
    ok = (rec["tests_passed"] and rec["answers_5xx"] == 0 and rec["extender_alive_after"]
          and rec["slow_loris"]["cut_off"] == rec["slow_loris"]["connections"])
    return 0 if ok else 1
