"""examples/plugins/node_quota: an out-of-tree plugin that declares a kind of its own (ConfigMap)
and reads it in the simulator from a dump, using only kubesched.framework."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from click.testing import CliRunner

from kubesched.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "node_quota"


def _simulate(cluster: Path) -> dict[str, str]:
    result = CliRunner().invoke(
        main,
        ["simulate", "--plugins", str(EXAMPLE), "--config", str(EXAMPLE / "config.yaml"), "--cluster", str(cluster),
         "--output", "json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    return {p["pod"]: p["node"] for p in doc["placements"] if p.get("node")}


def test_the_configmap_from_the_dump_caps_the_node(tmp_path: Path) -> None:
    placed = _simulate(EXAMPLE / "cluster.yaml")
    assert len(placed) == 3
    assert sorted(placed.values()).count("node-a") == 1  # the ConfigMap allows one pod there


def test_without_the_configmap_the_roomier_node_takes_every_pod(tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLE / "cluster.yaml").read_text())
    doc["items"] = [o for o in doc["items"] if o["kind"] != "ConfigMap"]
    plain = tmp_path / "cluster.yaml"
    plain.write_text(yaml.safe_dump(doc))
    assert set(_simulate(plain).values()) == {"node-a"}


def test_print_rbac_grants_the_configmaps_it_declares() -> None:
    result = CliRunner().invoke(
        main, ["run", "--print-rbac", "--plugins", str(EXAMPLE), "--config", str(EXAMPLE / "config.yaml")],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    role = next(d for d in yaml.safe_load_all(result.output) if d["kind"] == "ClusterRole")
    assert any("configmaps" in r["resources"] and r["verbs"] == ["list", "watch"] for r in role["rules"])
