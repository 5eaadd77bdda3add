"""``--gangs`` on the what-if commands (compare, capacity, sweep), one option as on ``simulate``:
the generated Workload API gangs are scheduled all or nothing under each configuration, with the
GenericWorkload gate on by default and required of a ``--config``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kubesched.cli import main
from unit.simulate.test_cli_simulate import ok

#: A gang that never fits two generated nodes (40 × 4 CPU) and two that fit anywhere (3 × 100m).
GANGS = ("--gangs", "members=40,cpu=4", "--gangs", "count=2,members=3,cpu=100m")
GATED: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "featureGates": {"GenericWorkload": True}}


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [*map(str, args)], env={"COLUMNS": "300"})


@pytest.fixture
def configs(tmp_path: Path) -> tuple[Path, Path]:
    gated, plain = tmp_path / "gated.yaml", tmp_path / "plain.yaml"
    gated.write_text(yaml.safe_dump(GATED))
    plain.write_text(yaml.safe_dump({k: v for k, v in GATED.items() if k != "featureGates"}))
    return gated, plain


def test_compare_schedules_the_gangs_all_or_nothing_under_each_configuration(configs: tuple[Path, Path]) -> None:
    gated, plain = configs
    doc = json.loads(ok(invoke("compare", "-q", "--config", gated, "--config", gated, "--nodes", "2", "--pods", "0",
                               *GANGS, "--output", "json")).stdout)
    assert [(r["scheduled"], r["unschedulable"]) for r in doc["configs"]] == [(6, 40), (6, 40)]
    result = invoke("compare", "-q", "--config", gated, "--config", plain, "--nodes", "2", *GANGS)
    assert result.exit_code != 0
    assert f"--gangs: --config {plain} leaves the GenericWorkload feature gate off" in result.output


def test_capacity_counts_a_gang_whole(tmp_path: Path) -> None:
    """A node template's answer: the 40-member gang fits on no fewer added nodes than it needs as a
    whole (one 64-CPU node would hold some of it: a gang places none of it there)."""
    template = tmp_path / "node.yaml"
    template.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "big"},
                                        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}))
    doc = json.loads(ok(invoke("capacity", "-q", "--nodes", "2", "--pods", "0", "--gangs", "members=40,cpu=4",
                               "--node-template", template, "--output", "json")).stdout)
    (answer,) = doc["scaleUp"]
    assert answer["nodes"] == 2
    assert {p["nodes"]: p["unplaced"] for p in answer["simulations"]}[1] == 40


def test_sweep_generates_the_gangs_with_every_generated_cluster(configs: tuple[Path, Path]) -> None:
    gated, plain = configs
    doc = json.loads(ok(invoke("sweep", "-q", "--config", gated, "--nodes", "2,3", "--pods-per-node", "0", *GANGS,
                               "--workers", "1", "--output", "json")).stdout)
    assert [(r["nodes"], r["scheduled"], r["unschedulable"]) for r in doc["results"]] == [(2, 6, 40), (3, 6, 40)]
    assert doc["results"][0]["clusterLabel"] == ("2 nodes / 0 pods + gangs members=40,cpu=4 "
                                                 "+ gangs count=2,members=3,cpu=100m")
    # Without --config the default profile gets the gate, as on simulate.
    default = json.loads(ok(invoke("sweep", "-q", "--nodes", "2", "--pods-per-node", "0", *GANGS,
                                   "--workers", "1", "--output", "json")).stdout)
    assert default["results"][0]["scheduled"] == 6
    result = invoke("sweep", "-q", "--config", plain, "--nodes", "2", *GANGS)
    assert result.exit_code != 0 and "leaves the GenericWorkload feature gate off" in result.output


@pytest.mark.parametrize("command", ["compare", "capacity", "sweep"])
def test_gangs_need_a_generated_cluster(command: str, configs: tuple[Path, Path], tmp_path: Path) -> None:
    gated, _ = configs
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    extra: list[str | Path] = {"compare": ["--config", gated, "--config", gated],
                               "capacity": ["--node-template", cluster], "sweep": []}[command]
    result = invoke(command, "-q", *extra, "--cluster", cluster, "--gangs", "members=2")
    assert result.exit_code != 0 and "--gangs needs --nodes" in result.output, result.output
