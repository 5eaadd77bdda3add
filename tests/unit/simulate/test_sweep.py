"""``kubesched sweep`` (simulate/whatif/sweep.py): every combination runs once, in worker processes; the
outcomes do not depend on the number of workers, and each equals ``kubesched simulate`` for the
same configuration, cluster and seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kubesched.cli import main
from kubesched.simulate.whatif.sweep import OUTCOME_FIELDS, jobs_for
from unit.simulate.test_cli_simulate import ok, run_json
from unit.simulate.test_compare import BINPACK, DEFAULT


def run_sweep(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["sweep", "-q", *map(str, args)], env={"COLUMNS": "300"})


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("sweep")
    (d / "spread.yaml").write_text(DEFAULT)
    (d / "binpack.yaml").write_text(BINPACK)
    return [d / "spread.yaml", d / "binpack.yaml"]


def sweep_json(configs: list[Path], workers: int) -> dict[str, Any]:
    args = [a for c in configs for a in ("--config", str(c))]
    doc: dict[str, Any] = json.loads(ok(run_sweep(*args, "--nodes", "20,40", "--seeds", "1-2", "--workers",
                                                  str(workers), "--output", "json")).stdout)
    return doc


def test_sweep_runs_every_combination_with_the_same_outcomes_on_one_or_two_workers(configs: list[Path]) -> None:
    one, two = sweep_json(configs, 1), sweep_json(configs, 2)
    assert (one["workers"], two["workers"]) == (1, 2)
    assert len(one["results"]) == len(two["results"]) == 2 * 2 * 2
    combos = {(r["configLabel"], r["nodes"], r["seed"]) for r in two["results"]}
    assert combos == {(c, n, s) for c in ("spread", "binpack") for n in (20, 40) for s in (1, 2)}
    for a, b in zip(one["results"], two["results"], strict=True):
        assert {k: a[k] for k in OUTCOME_FIELDS} == {k: b[k] for k in OUTCOME_FIELDS}, a["index"]
    # Each equals kubesched simulate for the same configuration, cluster and seed.
    r = next(x for x in two["results"] if x["configLabel"] == "binpack" and x["nodes"] == 40 and x["seed"] == 2)
    alone = run_json("--config", configs[1], "--nodes", "40", "--pods", "80", "--seed", "2")
    assert (r["scheduled"], r["unschedulable"]) == (alone["summary"]["scheduled"], alone["summary"]["unschedulable"])
    assert r["nodesUsed"] == sum(1 for n in alone["nodes"] if n["podsAfter"])
    rows = {(row["config"], row["cluster"]): row for row in two["summary"]}
    assert rows[("binpack", "40 nodes / 80 pods")]["runs"] == 2
    assert rows[("binpack", "40 nodes / 80 pods")]["nodesUsed"]["max"] <= rows[("spread", "40 nodes / 80 pods")][
        "nodesUsed"]["max"]


def test_sweep_text_and_errors(configs: list[Path], tmp_path: Path) -> None:
    text = ok(run_sweep("--config", configs[0], "--nodes", "20", "--seeds", "3", "--workers", "1")).stdout
    assert "Sweep: 1 simulation(s) on 1 worker(s)" in text and "20 nodes / 40 pods" in text
    for args, fragment in (
        (["--seeds", "1"], "give --cluster FILE or --nodes"),
        (["--nodes", "20", "--seeds", "3-1"], "empty range '3-1'"),
        (["--nodes", "x"], "'x' is not a number"),
    ):
        result = run_sweep(*args)
        assert result.exit_code == 2 and fragment in result.output, (args, result.output)


def test_jobs_are_every_combination_in_order() -> None:
    jobs = jobs_for(["a.yaml", "b.yaml"], (), ["c.yaml"], [(10, 20)], [1, 2])
    assert [(j.config, j.cluster, j.nodes, j.seed) for j in jobs] == [
        (cfg, cl, n, s) for cfg in ("a.yaml", "b.yaml") for cl, n in (("c.yaml", None), (None, 10)) for s in (1, 2)
    ]
    assert [j.index for j in jobs] == list(range(8))
