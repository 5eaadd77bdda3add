"""The six policies' scores on hand-computed cases, each from the reference file's arithmetic
(hkust-adsl/kubernetes-scheduler-simulator pkg/simulator/plugin/*_score.go, pkg/utils/frag.go)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import ScorePlugin
from kubesched.plugins.gpu_policies import (
    FGD,
    BestFit,
    DotProduct,
    GpuClustering,
    GpuPacking,
    RandomFit,
    TypicalPod,
    typical_pods,
)
from kubesched.plugins.gpushare import GpuLedger, parse_gpu_request
from kubesched.snapshot.gpushare.fragmentation import NodeStates, fragmentation
from kubesched.snapshot.gpushare.shapes import PodShape
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import table_of
from kubesched.testing.harness import new_plugin

from .helpers import gpu_node, gpu_pod


def cluster() -> NodeTable:
    """a: 4 idle GPUs · b: 4 GPUs, a share pod of 600 on GPU 0 · c: 2 GPUs, a share pod of 800 on
    GPU 0 and a 1-GPU pod on GPU 1 · d: 8 idle GPUs. CPUs 32/32/32/64, each bound pod takes 4."""
    return table_of(
        gpu_node("a", gpus=4, cpu="32"), gpu_node("b", gpus=4, cpu="32"), gpu_node("c", gpus=2, cpu="32"),
        gpu_node("d", gpus=8, cpu="64"),
        pods=[gpu_pod("s600", 600, node_name="b", index="0"), gpu_pod("s800", 800, node_name="c", index="0"),
              gpu_pod("one", 1000, node_name="c", index="1")],
    )


def scores(plugin_cls: type[ScorePlugin], raw_pod: dict[str, Any], table: NodeTable | None = None,
           args: dict[str, Any] | None = None, normalize: bool = False) -> dict[str, int]:
    table = table if table is not None else cluster()
    plugin = new_plugin(plugin_cls, args, table=table)
    pod = PodInfo.from_raw(raw_pod)
    rows = np.array(sorted(table.alive_rows(), key=lambda r: table.names[r]), dtype=np.intp)
    state = CycleState()
    out = plugin.score_batch(state, pod, table, rows)
    assert isinstance(out, np.ndarray)
    if normalize:
        assert plugin.normalize_score(state, pod, table, rows, out).is_success
    return {table.names[r]: int(s) for r, s in zip(rows, out, strict=True)}


def test_gpu_packing_prefers_shared_gpus_then_used_nodes_then_idle_nodes() -> None:
    # a, d idle: max(33 - free, free); b: tightest fitting GPU 400 left → 100 - 40 / 10 = 96;
    # c: 200 left → 100 - 20 / 10 = 98.
    assert scores(GpuPacking, gpu_pod("p", 200)) == {"a": 29, "b": 96, "c": 98, "d": 25}
    # 500 fits only a fully free GPU on b: max(50 - 1, 33); nothing on c.
    assert scores(GpuPacking, gpu_pod("p", 500)) == {"a": 29, "b": 49, "c": 0, "d": 25}
    assert scores(GpuPacking, gpu_pod("p", 1000, count=2)) == {"a": 29, "b": 48, "c": 0, "d": 25}
    assert scores(GpuPacking, gpu_pod("p")) == {"a": 0, "b": 0, "c": 0, "d": 0}


def test_best_fit_scores_the_least_left_over_then_normalizes() -> None:
    # raw = int((1 - (0.5 (cpu left - 4000) / 128000 + 0.5 (gpu left - 500) / 8000)) * 100):
    # a 67.19 → 67, b 72.5 → 72, d 29.69 → 29; c (200 milli left < 500) the lowest.
    raw = scores(BestFit, gpu_pod("p", 500))
    assert (raw["a"], raw["b"], raw["d"]) == (67, 72, 29) and raw["c"] < 29
    low, span = raw["c"], 72 - raw["c"]  # min-max: (s - lowest) * 100 / (highest - lowest)
    assert scores(BestFit, gpu_pod("p", 500), normalize=True) == {
        "a": (67 - low) * 100 // span, "b": 100, "c": 0, "d": (29 - low) * 100 // span}


def test_dot_product_scores_one_minus_half_the_normalised_dot_product() -> None:
    # a: 1 - (0.25 * 0.03125 + 0.5 * 0.0625) / 2 = 0.98046875 → 98; b: 0.9833 → 98;
    # c: (24000/128000 * 0.03125 + 200/8000 * 0.0625) → 0.99629 → 99; d: 0.9609375 → 96.
    assert scores(DotProduct, gpu_pod("p", 500)) == {"a": 98, "b": 98, "c": 99, "d": 96}
    # More CPU asked than c has left: 0.
    assert scores(DotProduct, gpu_pod("p", 500, cpu="30"))["c"] == 0


def test_gpu_clustering_groups_pods_of_one_kind() -> None:
    # base = 25 * (8000 - gpu left) / 8000: a 12, b 14, c 24, d 0.
    assert scores(GpuClustering, gpu_pod("p", 300)) == {"a": 37, "b": 89, "c": 74, "d": 25}
    assert scores(GpuClustering, gpu_pod("p", 1000)) == {"a": 37, "b": 14, "c": 74, "d": 25}
    assert scores(GpuClustering, gpu_pod("p")) == {"a": 0, "b": 0, "c": 0, "d": 0}


TWO_SHAPES = [{"milliCpu": 1000, "milliGpu": 500, "gpuCount": 1, "frequency": 0.5},
              {"milliCpu": 1000, "milliGpu": 1000, "gpuCount": 1, "frequency": 0.5}]


def fgd_cluster() -> NodeTable:
    # x: 2 idle GPUs; y: 2 GPUs, 500 used on GPU 0.
    return table_of(gpu_node("x", gpus=2), gpu_node("y", gpus=2),
                     pods=[gpu_pod("half", 500, node_name="y", index="0", cpu="1")])


def test_fgd_scores_the_fragmentation_a_pod_adds() -> None:
    # F(x) = 0. A 500 pod on x leaves [500, 1000]: the 1000-shape sees GPU 0 as a fragment,
    # F = 0.5 * 500 = 250 → int(sigmoid(-0.25) * 100) = 43.
    # F(y) = 250; on GPU 0 y becomes [0, 1000], F = 0 → sigmoid(0.25) → 56 (GPU 1 would give 43).
    assert scores(FGD, gpu_pod("p", 500), table=fgd_cluster(), args={"typicalPods": TWO_SHAPES}) == {"x": 43, "y": 56}
    # A whole GPU: x → [0, 1000] (F 0), y → [500, 0] (F 250): no change either way, 50.
    assert scores(FGD, gpu_pod("p", 1000), table=fgd_cluster(), args={"typicalPods": TWO_SHAPES}) == {"x": 50, "y": 50}
    # A pod without any request scores 100.
    raw = gpu_pod("p", cpu="1")
    raw["spec"]["containers"][0]["resources"] = {}
    assert scores(FGD, raw, table=fgd_cluster(), args={"typicalPods": TWO_SHAPES}) == {"x": 100, "y": 100}


def test_fgd_chooses_the_gpu_with_the_best_score_for_gpushare() -> None:
    table = fgd_cluster()
    fgd = new_plugin(FGD, {"typicalPods": TWO_SHAPES}, table=table)
    pod = PodInfo.from_raw(gpu_pod("p", 500))
    request = parse_gpu_request(pod)
    assert request is not None
    row = table.row_of("y")
    assert row is not None
    assert fgd.choose_gpus(pod, request, row, GpuLedger.of(table).free_without(pod, row)) == (0,)


def test_typical_pods_keep_the_most_frequent_shapes_up_to_the_threshold() -> None:
    a, b, c, d = PodShape(1000, 500, 1), PodShape(2000, 1000, 1), PodShape(4000, 0, 0), PodShape(8000, 1000, 8)
    shapes = [a] * 5 + [b] * 3 + [c] + [d]
    assert typical_pods(shapes) == [
        TypicalPod(milli_cpu=1000, milli_gpu=500, gpu_count=1, frequency=0.5),
        TypicalPod(milli_cpu=2000, milli_gpu=1000, gpu_count=1, frequency=0.3),
        TypicalPod(milli_cpu=8000, milli_gpu=1000, gpu_count=8, frequency=0.1),  # ties: the larger first
        TypicalPod(milli_cpu=4000, frequency=0.1),
    ]
    cut = typical_pods(shapes, popularity_threshold=80)
    assert [t.frequency for t in cut] == pytest.approx([0.625, 0.375])


def test_random_fit_gives_one_feasible_node_100_and_is_seeded() -> None:
    table = cluster()
    plugin = new_plugin(RandomFit, None, table=table)
    rows = table.alive_rows()
    picks = []
    for seed in (7, 7, 8, 9, 10):
        plugin.handle.rng.seed(seed)
        state = CycleState()
        assert plugin.pre_score(state, PodInfo.from_raw(gpu_pod("p", 500)), table, rows).is_success
        out = plugin.score_batch(state, PodInfo.from_raw(gpu_pod("p", 500)), table, rows)
        assert isinstance(out, np.ndarray)
        assert sorted(out.tolist()) == [0, 0, 0, 100]
        picks.append(int(np.argmax(out)))
    assert picks[0] == picks[1] and len(set(picks)) > 1


def test_fragmentation_of_many_states_equals_each_measured_alone() -> None:
    """Identical states are measured once: the result is each state's own measure, bit for bit."""
    rng = np.random.default_rng(3)
    n, g = 400, 8
    free = rng.choice([0, 100, 250, 500, 1000], size=(n, g)).astype(np.int64)
    free[rng.random(n) < 0.5] = 1000  # many identical idle nodes
    cpu = rng.choice([0, 2000, 8000, 32000], size=n).astype(np.int64)
    codes = rng.choice([-1, 0, 1], size=n).astype(np.int64)
    pods = [TypicalPod(milli_cpu=int(c), milli_gpu=int(m), gpu_count=k, gpu_model=model, frequency=f)
            for c, m, k, model, f in [(1000, 500, 1, "", 0.3), (4000, 1000, 2, "A", 0.2), (8000, 0, 0, "", 0.1),
                                      (2000, 250, 1, "B", 0.25), (16000, 1000, 8, "", 0.15)]]
    access = np.array([[t.gpu_model in ("", model) for t in pods] for model in ("", "A", "B")])
    states = NodeStates(cpu, free, codes, access)
    together = fragmentation(states, pods)
    alone = [fragmentation(NodeStates(cpu[i:i + 1], free[i:i + 1], codes[i:i + 1], access), pods)[0] for i in range(n)]
    assert together.tolist() == alone
