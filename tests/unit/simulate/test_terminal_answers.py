"""What ``kubesched simulate`` prints in a terminal, read as a user reads it: widths that follow the
terminal, readable quantities, every input pod accounted for, each preemption listed, ``-o wide``,
one section per profile and ``--explain`` near misses first (issue 29 item 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kubesched.api.readable import readable_bytes, readable_milli_cpu, readable_quantity
from kubesched.cli import main

GI = 2**30


def run(*args: str | Path, columns: int | None = 100) -> Result:
    env: dict[str, str | None] = {"COLUMNS": None if columns is None else str(columns)}
    result = CliRunner().invoke(main, ["simulate", "-q", *map(str, args)], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


# -- width -----------------------------------------------------------------------------------------


def test_piped_output_without_columns_is_100_wide_and_long_reasons_wrap_in_their_cell() -> None:
    out = run(columns=None).stdout
    assert widest(out) <= 100
    assert "no free underlay IP" in out  # wrapped, not cut


def test_columns_sets_the_width() -> None:
    out = run(columns=160).stdout
    assert 100 < widest(out) <= 160
    assert widest(run(columns=72).stdout) <= 72


# -- quantities ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("memory", 9845650 * 2**20, "9.4Ti"),
        ("memory", 31203 * 2**20, "30.5Gi"),
        ("memory", 16 * GI, "16Gi"),
        ("memory", 384 * 2**20, "384Mi"),
        ("memory", 1000, "1000"),
        ("ephemeral-storage", 100 * GI, "100Gi"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        ("cpu", 3250, "3.2"),
        ("cpu", 14100, "14.1"),
        ("cpu", 16000, "16"),
        ("cpu", 250, "250m"),
        ("cpu", 0, "0"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 8, "8"),
    ],
)
def test_readable_quantities(resource: str, amount: int, text: str) -> None:
    assert readable_quantity(resource, amount) == text


def test_readable_negative_amounts_keep_their_sign() -> None:
    assert readable_bytes(-3 * GI) == "-3Gi"
    assert readable_milli_cpu(-1500) == "-1.5"


def test_node_table_shows_readable_cpu_and_memory() -> None:
    out = run(columns=200).stdout
    row = next(line for line in out.splitlines() if "│ worker-5 " in line)
    # A CPU amount in cores with one decimal and memory in Gi, whatever the demo's placements are
    # (they move with the scorers: ``14100m`` / ``36224Mi`` were printed raw before).
    assert re.search(r"│ \d+(\.\d)?/16 │ \d+(\.\d)?Gi/64Gi │", row), row
    assert not re.search(r"\d+m/16|\d+Mi/64Gi", out)


# -- every pod of the input accounted for; each preemption listed -------------------------------------


def _node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def _pod(name: str, cpu: str, node: str | None = None, priority: int = 0, phase: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"priority": priority,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if phase:
        pod["status"] = {"phase": phase}
    return pod


@pytest.fixture(scope="module")
def preemption_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 4-CPU node full of five low-priority pods, three finished pods on it, two pods bound to a
    node the dump lacks, and one urgent pod that needs 3.5 CPU: it preempts all five."""
    items = [_node("n1")]
    items += [_pod(f"low-{i}", "800m", "n1") for i in range(5)]
    items += [_pod(f"done-{i}", "1", "n1", phase="Succeeded") for i in range(2)]
    items += [_pod("failed-0", "1", "n1", phase="Failed")]
    items += [_pod(f"ghost-{i}", "1", "gone-node") for i in range(2)]
    items += [_pod("urgent", "3500m", priority=1000)]
    path = tmp_path_factory.mktemp("dump") / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_every_pod_of_the_input_is_accounted_for(preemption_dump: Path) -> None:
    result = run("--cluster", preemption_dump, columns=200)
    out = result.stdout
    # 11 pods in the dump: 8 live ones (2 pre-bound on a missing node, 5 preempted, 1 scheduled) + 3 terminal.
    assert re.search(r"pods\s+8 \(\+3 terminal\)", out), out
    assert re.search(r"pre-bound\s+2 \(2 on nodes not in the input\)", out), out
    assert "3 terminal pod(s) (Succeeded or Failed) in the input: not scheduled" in out
    assert "2 pre-bound pod(s) on nodes not in the input" in out
    assert "ghost-0" in result.stderr and "gone-node" in result.stderr


def test_the_json_counts_terminal_pods_and_pods_on_missing_nodes(preemption_dump: Path) -> None:
    summary = json.loads(run("--cluster", preemption_dump, "--output", "json").stdout)["summary"]
    assert summary["terminal"] == 3
    assert summary["preBoundOnMissingNodes"] == 2
    assert summary["preBound"] + summary["simulated"] + summary["preempted"] == summary["pods"] == 8


def test_the_summary_lists_each_preemption_with_its_victims_capped(preemption_dump: Path) -> None:
    out = run("--cluster", preemption_dump, columns=200).stdout
    assert "Preemptions: 1 (5 pods evicted)" in out
    row = next(line for line in out.splitlines() if "default/urgent" in line)
    assert "n1" in row and "5: default/low-0, default/low-1, default/low-2 … and 2 more" in row


def test_preemptions_beyond_max_rows_are_counted() -> None:
    out = run("--nodes", "50", "--pods", "400", "--max-rows", "1", columns=200).stdout
    assert re.search(r"Preemptions: 3 \(3 pods evicted\)", out), out
    assert "… and 2 more preemptions" in out


# -- -o wide ---------------------------------------------------------------------------------------


def test_wide_lists_each_pod_with_its_node_and_score_and_the_pods_it_preempted(preemption_dump: Path) -> None:
    data = json.loads(run("--cluster", preemption_dump, "--output", "json").stdout)
    urgent = next(p for p in data["placements"] if p["pod"] == "default/urgent")
    out = run("--cluster", preemption_dump, "-o", "wide", columns=200).stdout
    out = out[out.index("Pods: 6"):]  # the urgent pod and its five victims (pre-bound pods are not listed)
    row = next(line for line in out.splitlines() if line.startswith("│ default/urgent"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    # The only node, so it was chosen without scoring: no score rather than a 0.
    assert urgent["score"]["plugins"] == {}
    assert cells[:3] == ["default/urgent", "n1", "-"]
    assert "evicted 5: default/low-0" in cells[3]
    victim = next(line for line in out.splitlines() if line.startswith("│ default/low-4"))
    assert "Preempted" in victim


def test_wide_on_the_demo_lists_every_pod_per_profile_problems_first() -> None:
    data = json.loads(run("--output", "json").stdout)
    out = run("-o", "wide", columns=200).stdout
    for placement in data["placements"]:
        row = next(line for line in out.splitlines() if line.startswith(f"│ {placement['pod']} "))
        assert (placement["node"] or "-") in row
    blueking = out[out.index("Pods (profile blueking-ip-scheduler): 70"):]
    rows = [line for line in blueking.splitlines() if line.startswith("│ trading/")]
    assert all("Unschedulable" in r for r in rows[:6]) and all("Scheduled" in r for r in rows[6:])
    assert "no free underlay IP" in rows[0]


def test_wide_is_capped_with_a_count_of_the_rest() -> None:
    out = run("--nodes", "20", "--pods", "300", "-o", "wide", "--max-rows", "10", columns=200).stdout
    assert re.search(r"Pods: \d+, first 10", out)
    listed = [line for line in out.splitlines() if re.match(r"│ [a-z0-9-]+/", line)]
    assert re.search(r"… and [\d,]+ more pods \(--max-rows to list more", out), out
    assert len(listed) >= 10


# -- per-profile sections ------------------------------------------------------------------------------


def test_demo_summary_has_a_section_per_profile() -> None:
    out = run(columns=200).stdout
    table = out[out.index("Per profile"):]
    default = next(line for line in table.splitlines() if "│ default-scheduler" in line)
    blueking = next(line for line in table.splitlines() if "│ blueking-ip-scheduler" in line)
    assert [c.strip() for c in default.strip("│").split("│")][1:4] == ["40", "37", "3"]
    assert [c.strip() for c in blueking.strip("│").split("│")][1:4] == ["70", "64", "6"]
    default_at, blueking_at = out.index("profile default-scheduler ─"), out.index("profile blueking-ip-scheduler ─")
    assert default_at < out.index("analytics/bigmem-1") < blueking_at < out.index("trading/gateway-65")


# -- --explain: near misses first -----------------------------------------------------------------------


def _gpu_node(name: str, gpus: int, tainted: bool = False) -> dict[str, Any]:
    node = _node(name, cpu="16")
    if gpus:
        node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
        node["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
    if tainted:
        node["spec"] = {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}
    return node


def _gpu_pod(name: str, gpus: int, node: str | None = None) -> dict[str, Any]:
    pod = _pod(name, "1", node)
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    return pod


@pytest.fixture(scope="module")
def gpu_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pod wanting 8 GPUs: 20 CPU-only nodes; gpu-busy (2 of 8 free), gpu-full (1 of 8 free),
    gpu-tainted (8 free, tainted) and cpu-tainted (tainted, no GPU)."""
    items = [_gpu_node(f"cpu-{i:02d}", 0) for i in range(20)]
    items += [_gpu_node("gpu-busy", 8), _gpu_node("gpu-full", 8), _gpu_node("gpu-tainted", 8, tainted=True),
              _gpu_node("cpu-tainted", 0, tainted=True)]
    items += [_gpu_pod("busy", 6, "gpu-busy"), _gpu_pod("full", 7, "gpu-full"), _gpu_pod("trainer", 8)]
    path = tmp_path_factory.mktemp("gpu") / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_explain_shows_the_nodes_that_came_closest_first_then_counts_the_rest(gpu_dump: Path) -> None:
    out = run("--cluster", gpu_dump, "--explain", "trainer", columns=200).stdout
    text = out[out.index("Explain default/trainer"):]
    assert "Nodes that came closest (10 of 24)" in text
    rows = [line for line in text.splitlines() if line.startswith("│ ") and "┃" not in line]
    order = [r.strip("│ ").split("│")[0].strip() for r in rows]
    # One failing plugin and nothing short, then 6 of 8 GPUs short, then 7, then the CPU-only nodes.
    assert order[:3] == ["gpu-tainted", "gpu-busy", "gpu-full"], order
    assert "nvidia.com/gpu 6" in rows[1] and "nvidia.com/gpu 7" in rows[2]
    assert all(n.startswith("cpu-") and n != "cpu-tainted" for n in order[3:10]), order
    rest = text[text.index("The other 14 rejected nodes, by reason"):]
    assert re.search(r"│\s+13 │ NodeResourcesFit: Insufficient nvidia.com/gpu\s+│", rest), rest
    assert re.search(r"│\s+1 │ TaintToleration: node\(s\) had untolerated taint\(s\); NodeResourcesFit", rest), rest
