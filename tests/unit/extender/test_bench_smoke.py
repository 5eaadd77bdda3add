"""CI smoke for bench/extender.py: the benchmark runs end to end at tiny sizes (no thresholds)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import extender as bench_extender  # noqa: E402


def test_bench_runs_at_tiny_sizes() -> None:
    results = bench_extender.run(sizes=(12,), modes=("nodes", "names"), iterations=3)
    assert [r["mode"] for r in results] == ["nodes", "names"]
    nodes, names = results
    assert nodes["feasible"] == names["feasible"] > 0
    assert {"warm", "cold"} <= nodes.keys() and "cache" in names
    assert nodes["table_hits"] >= 3  # warm calls reuse the node table
    assert nodes["warm"]["filter+prioritize"]["n"] == 3


def test_floor_runs_at_a_tiny_size() -> None:
    import asyncio

    floor = asyncio.run(bench_extender.floor_case(12, 3))
    assert floor["round_trip"]["kubesched"]["n"] == floor["round_trip"]["noop"]["n"] == 3
    assert set(floor["extender_cpu_ms_per_pod"]) == {"filter", "prioritize"}
