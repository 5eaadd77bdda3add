"""The time-to-answer benchmark (bench/time_to_answer.py) at a tiny size: every variant is one real
``kubesched simulate`` process, timed with its peak RSS; the BENCHMARKS.md section renders. No
performance threshold here: the figures live in BENCHMARKS.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import time_to_answer  # noqa: E402


def test_every_variant_is_a_whole_process_with_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--nodes", "30", "--pods", "60", "--rounds", "1", "--no-save"]
    assert time_to_answer.main(argv) == 0
    out = capsys.readouterr().out
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["variant"] for r in runs] == list(time_to_answer.VARIANTS)
    by = {r["variant"]: r for r in runs}
    for r in runs:
        assert r["wall_seconds"] > 0 and r["peak_rss_mib"] > 10 and r["output_bytes"] > 0
    # json and jsonl carry the placements; jsonl adds every evaluated node's verdict.
    assert by["jsonl"]["output_bytes"] > by["json"]["output_bytes"] > by["summary"]["output_bytes"]
    assert "loop" in out.splitlines()[-1]


def test_the_report_section_names_the_targets() -> None:
    runs = [{"wall_seconds": 2.0, "cpu_seconds": 1.9, "peak_rss_mib": 200.0, "output_bytes": 5000, "loadavg": [1.0]}]
    variants = {v: {"argv": f"kubesched simulate ({v})", "wall_seconds_median": 2.0, "cpu_seconds_median": 1.9,
                    "peak_rss_mib_median": 200.0, "output_bytes": 5000, "runs": runs} for v in time_to_answer.VARIANTS}
    record = {"benchmark": "time-to-answer", "size": "full", "date": "2026-11-24T00:00:00+00:00", "nodes": 5000,
              "pods": 10000, "seed": 1, "rounds": 1, "variants": variants, "loop_seconds_median": 1.5,
              "loop_pods_per_second_median": 5000.0, "simulated_pods": 7882, "command": "python -m bench x",
              "commit": "abc"}
    text = "\n".join(time_to_answer.report_section([record]))
    assert "| summary | `kubesched simulate (summary)` | 2.00 |" in text
    assert "| summary: wall seconds <= 2.5 s | 2.00 | yes |" in text
    assert "| summary: peak rss mib <= 300 MiB | 200.00 | yes |" in text
    assert "7,882 pods" in text
    assert "Not run yet" in "\n".join(time_to_answer.report_section([]))
