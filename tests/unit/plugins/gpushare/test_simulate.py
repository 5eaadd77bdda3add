"""GpuShare with each policy end to end: `kubesched simulate --cluster` on a small hand-made dump
(two 2-GPU nodes; four 500-milli share pods, then a pod of 2 whole GPUs), configured as
examples/gpushare.yaml with the policy swapped in as the paper's experiments pair them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main

from .helpers import gpu_node, gpu_pod

EXAMPLE = Path(__file__).parents[4] / "examples" / "gpushare.yaml"
#: policy → GpuShare's gpuSelMethod (experiments/run_scripts/generate_run_scripts.py).
POLICIES = {"FGD": "FGD", "BestFit": "best", "DotProduct": "best", "GpuPacking": "best",
            "GpuClustering": "best", "RandomFit": "random"}


def _named(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The one entry of a plugin list (or pluginConfig) named ``name``: a change to the example
    that moves or drops it fails here instead of editing another plugin."""
    found = [e for e in entries if e.get("name") == name]
    assert len(found) == 1, f"{EXAMPLE.name}: expected one {name!r} among {[e.get('name') for e in entries]}"
    return found[0]


def policy_config(policy: str) -> dict[str, Any]:
    """examples/gpushare.yaml as data with FGD replaced by ``policy`` wherever it is enabled (at
    the same weight) and GpuShare's gpuSelMethod set to the policy's."""
    config = yaml.safe_load(EXAMPLE.read_text())
    profile = config["profiles"][0]
    plugins = profile["plugins"]
    for point in ("multiPoint", "score"):
        _named(plugins[point]["enabled"], "FGD")["name"] = policy
    _named(profile["pluginConfig"], "GpuShare")["args"]["gpuSelMethod"] = POLICIES[policy]
    return config


def test_policy_config_swaps_the_score_plugin_and_gpu_choice() -> None:
    config = policy_config("BestFit")
    profile = config["profiles"][0]
    assert [e["name"] for e in profile["plugins"]["multiPoint"]["enabled"]] == ["GpuShare", "BestFit"]
    assert profile["plugins"]["score"]["enabled"] == [{"name": "BestFit", "weight": 1000}]
    assert profile["pluginConfig"] == [{"name": "GpuShare", "args": {"gpuSelMethod": "best"}}]
    assert "FGD" not in yaml.safe_dump(config)


def write_config(path: Path, policy: str) -> None:
    path.write_text(yaml.safe_dump(policy_config(policy)))


def write_dump(path: Path) -> None:
    items: list[dict[str, Any]] = [gpu_node("n1", gpus=2, cpu="32"), gpu_node("n2", gpus=2, cpu="32")]
    for i in range(4):
        items.append(gpu_pod(f"share-{i}", 500, scheduler_name="default-scheduler"))
    items.append(gpu_pod("two-gpus", 1000, count=2, scheduler_name="default-scheduler"))
    for item in items:
        item.setdefault("apiVersion", "v1")
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


def simulate(tmp_path: Path, policy: str, seed: int = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    write_config(tmp_path / "config.yaml", policy)
    write_dump(tmp_path / "dump.yaml")
    out = tmp_path / f"out-{policy}-{seed}.yaml"
    result = CliRunner().invoke(main, ["simulate", "--config", str(tmp_path / "config.yaml"), "--cluster",
                                       str(tmp_path / "dump.yaml"), "--output", "json", "--seed", str(seed),
                                       "--out-cluster", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout), yaml.safe_load(out.read_text())["items"]


def gpu_use(objects: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    use: dict[tuple[str, int], int] = {}
    for o in objects:
        if o["kind"] != "Pod" or not o["spec"].get("nodeName"):
            continue
        ann = o["metadata"]["annotations"]
        indices = [int(i) for i in ann["alibabacloud.com/gpu-index"].split("-")]
        assert len(indices) == int(ann["alibabacloud.com/gpu-count"])
        for i in indices:
            key = (o["spec"]["nodeName"], i)
            use[key] = use.get(key, 0) + int(ann["alibabacloud.com/gpu-milli"])
    return use


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_each_policy_places_pods_on_gpus_without_over_committing_one(tmp_path: Path, policy: str) -> None:
    doc, objects = simulate(tmp_path, policy)
    use = gpu_use(objects)
    assert all(0 < milli <= 1000 for milli in use.values()), use
    placed = {p["pod"].split("/")[1]: p["node"] for p in doc["placements"]}
    if policy != "RandomFit":
        # The packing policies put the four halves on one node's two GPUs, leaving the other
        # node's two whole GPUs to the last pod.
        assert all(placed.values()), placed
        assert len({placed[f"share-{i}"] for i in range(4)}) == 1
        assert sorted(use.values()) == [1000, 1000, 1000, 1000]
    # The same seed gives the same placements and GPUs.
    again, objects_again = simulate(tmp_path, policy)
    assert {p["pod"]: p["node"] for p in again["placements"]} == {p["pod"]: p["node"] for p in doc["placements"]}
    assert gpu_use(objects_again) == use
