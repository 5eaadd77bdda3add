"""`--explain` shows what PodTopologySpread saw on each node: the domain, its matching pods and the
skew the pod would make — the numbers behind "node(s) didn't match pod topology spread constraints"."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.testing import node, pod

ZONE = "topology.kubernetes.io/zone"


def test_explain_shows_domain_counts_and_skew(tmp_path: Path) -> None:
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    items = [node("a1", labels={ZONE: "za"}), node("b1", labels={ZONE: "zb"})]
    for i in range(2):  # two replicas already in zone za
        items.append(pod(f"web-{i}", labels={"app": "web"}, node_name="a1"))
    new = pod("web-new", labels={"app": "web"})
    new["spec"]["topologySpreadConstraints"] = spread
    items.append(new)
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--explain", "web-new"],
                                catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "PodTopologySpread: topology.kubernetes.io/zone=za: 2 matching, skew 3 > 1" in out
    assert "PodTopologySpread: topology.kubernetes.io/zone=zb: 0 matching, skew 1 <= 1" in out
    assert "didn't match pod topology spread constraints" in out


def test_explain_shows_inter_pod_affinity_counts(tmp_path: Path) -> None:
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    items = [node("a1"), node("b1"), pod("db-0", labels={"app": "db"}, node_name="a1")]
    new = pod("db-1", labels={"app": "db"})
    new["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    items.append(new)
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--explain", "db-1"],
                                catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "InterPodAffinity: anti-affinity kubernetes.io/hostname=a1: 1 matching" in result.stdout
    assert "InterPodAffinity: anti-affinity kubernetes.io/hostname=b1: 0 matching" in result.stdout
