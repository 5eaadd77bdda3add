"""The replay's memos (bench/analysis.md, "Replay speed, fifth pass") give what measuring again
gives, whatever changed in between: the fragmentation measure kept per node state and target
workload, FGD's scores kept per node state, and the replay's GPU sums kept per row while the
ledger says which rows moved. Each test compares with a fresh measure after changes a stale memo
would miss."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.gpu_policies import FGD
from kubesched.plugins.gpu_policies import fgd as fgd_module
from kubesched.plugins.gpushare import GpuLedger, parse_gpu_request
from kubesched.simulate.engine.gpu_metrics import GpuMetrics
from kubesched.snapshot.gpushare import fragmentation as frag
from kubesched.snapshot.gpushare.fragmentation import NodeStates, fragmentation
from kubesched.snapshot.gpushare.resources import node_resources
from kubesched.snapshot.gpushare.typical_pods import TypicalPod
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import table_of
from kubesched.testing.harness import new_plugin

from .helpers import gpu_node, gpu_pod

SHAPES = [{"milliCpu": 1000, "milliGpu": 500, "gpuCount": 1, "frequency": 0.4},
          {"milliCpu": 4000, "milliGpu": 1000, "gpuCount": 1, "frequency": 0.3},
          {"milliCpu": 8000, "milliGpu": 1000, "gpuCount": 2, "frequency": 0.2},
          {"milliCpu": 2000, "frequency": 0.1}]
TYPICAL = [TypicalPod.model_validate(s) for s in SHAPES]


def test_fragmentation_memo_answers_per_workload_and_model_access() -> None:
    """One state measured against two workloads and two model accesses: each answer is that
    workload's own measure (a memo keyed by the state alone would give the first)."""
    free = np.array([[500, 1000, 0, 250]], dtype=np.int64)
    cpu = np.array([6000], dtype=np.int64)
    codes = np.array([0], dtype=np.int64)
    every = np.ones((2, len(TYPICAL)), dtype=np.bool_)
    none = np.zeros((2, len(TYPICAL)), dtype=np.bool_)
    other = [TypicalPod(milli_cpu=1000, milli_gpu=750, gpu_count=1, frequency=1.0)]
    answers = []
    for pods, access in ((TYPICAL, every), (TYPICAL, none), (other, every[:, :1]), (TYPICAL, every)):
        states = NodeStates(cpu, free, codes, access)
        got = fragmentation(states, pods)
        assert got.tolist() == frag._measure(states, pods).tolist()
        answers.append(float(got[0]))
    assert len(set(answers[:3])) == 3 and answers[3] == answers[0]


def test_fragmentation_memo_gives_each_states_own_measure() -> None:
    """Many small calls over states that repeat (as node states do): every answer, memo hit or
    not, equals the measure without the memo, bit for bit."""
    rng = np.random.default_rng(5)
    access = np.ones((3, len(TYPICAL)), dtype=np.bool_)
    access[2, 1] = False
    for _ in range(200):
        n = int(rng.integers(1, 6))
        free = rng.choice([0, 250, 500, 1000], size=(n, 4)).astype(np.int64)
        cpu = rng.choice([0, 1000, 4000, 16000], size=n).astype(np.int64)
        codes = rng.choice([-1, 0, 1], size=n).astype(np.int64)
        states = NodeStates(cpu, free, codes, access)
        assert fragmentation(states, TYPICAL).tolist() == frag._measure(states, TYPICAL).tolist()


def test_many_eight_gpu_states_each_get_their_own_measure() -> None:
    """Many states at once (the array path, which measures each distinct state once) of 8-GPU
    nodes whose free GPUs differ only in the 7th smallest value, 100 against 500 (equal in their
    low 4 bits): each gets the measure it has alone. Two int64 keys once held those states and the
    7th value's high bits overflowed, so they were measured as one and FGD placed pods elsewhere."""
    pods = [TypicalPod(milli_cpu=1000, milli_gpu=500, gpu_count=1, frequency=0.5),
            TypicalPod(milli_cpu=1000, milli_gpu=1000, gpu_count=1, frequency=0.5)]
    access = np.ones((2, 2), dtype=np.bool_)
    rng = np.random.default_rng(11)
    a, b = [0, 0, 0, 0, 0, 0, 100, 1000], [0, 0, 0, 0, 0, 0, 500, 1000]
    free = np.array([a, b] + [rng.permutation(a if i % 3 else b).tolist() for i in range(98)], dtype=np.int64)
    cpu = rng.choice([0, 4000, 2 ** 33], size=len(free)).astype(np.int64)
    codes = rng.integers(-1, 1, size=len(free)).astype(np.int64)
    states = NodeStates(cpu, free, codes, access)
    alone = [fragmentation(NodeStates(cpu[i:i + 1], free[i:i + 1], codes[i:i + 1], access), pods)[0]
             for i in range(len(free))]
    assert fragmentation(states, pods).tolist() == alone
    assert alone[0] != alone[1]


def test_state_measure_in_python_equals_numpys_to_the_bit() -> None:
    """The one-state Python measure against the array measure, on workloads of odd frequencies
    (sums that depend on their order), widths up to 8 GPUs, models a pod does not accept and
    CPU pods: equal as floats, bit for bit."""
    rng = np.random.default_rng(9)
    for _ in range(40):
        shapes = []
        for _ in range(int(rng.integers(1, 30))):
            milli = int(rng.choice([0, 100, 250, 333, 500, 1000]))
            count = 0 if milli == 0 else (1 if milli < 1000 else int(rng.integers(1, 5)))
            shapes.append(TypicalPod(milli_cpu=int(rng.integers(0, 20)) * 500, milli_gpu=milli, gpu_count=count,
                                     frequency=float(rng.random())))
        access = rng.random((4, len(shapes))) < 0.8
        n = int(rng.integers(1, 40))
        free = rng.choice([0, 50, 100, 250, 333, 500, 667, 900, 1000], size=(n, int(rng.integers(1, 9))))
        states = NodeStates(rng.integers(-1000, 64000, size=n), free.astype(np.int64),
                            rng.integers(-1, 3, size=n), access)
        measure = frag.StateMeasure(shapes, access)
        got = [measure.of(int(c), int(m), f) for c, m, f in
               zip(states.cpu_left, states.model_codes, states.free.tolist(), strict=True)]
        assert got == frag._measure(states, shapes).tolist()


def test_state_measure_memo_by_cpu_class_gives_each_cpu_its_own_measure() -> None:
    """The memo keys a state by how many of the typical pods' CPU asks its CPU left reaches:
    CPU left exactly at an ask, one below and one above, measured through one memo in every
    order, equals the array measure of each (a class off by one at the boundary would give a
    neighbour's value)."""
    access = np.ones((2, len(TYPICAL)), dtype=np.bool_)
    asks = sorted({t.milli_cpu for t in TYPICAL})
    cpus = [c + d for c in asks for d in (-1, 0, 1)] + [0, 10**6]
    free = [[1000, 500, 0, 250], [1000, 1000, 1000, 1000], [0, 0, 0, 0]]
    for order in (cpus, cpus[::-1]):
        frag._MEMOS.clear()
        frag._MEASURES.clear()
        measure = frag.state_measure(TYPICAL, access)
        for gpus in free:
            got = [measure.of(c, 0, gpus) for c in order]
            states = NodeStates(np.array(order, dtype=np.int64), np.array([gpus] * len(order), dtype=np.int64),
                                np.zeros(len(order), dtype=np.int64), access)
            assert got == frag._measure(states, TYPICAL).tolist()
    assert len({measure.of(c, 0, free[0]) for c in cpus}) <= len(asks) + 1  # one per class at most


def _place(table: NodeTable, rng: random.Random, name: str) -> None:
    """Bind a share or whole-GPU pod on a random node where it fits, on the first GPUs that fit."""
    ledger = GpuLedger.of(table)
    milli = rng.choice([250, 500, 1000])
    count = 1 if milli < 1000 else rng.choice([1, 2])
    rows = table.alive_rows().tolist()
    rng.shuffle(rows)
    for row in rows:
        free = ledger.free(np.array([row], dtype=np.intp))[0][: int(ledger.gpu_counts(np.array([row]))[0])]
        fits = [i for i, f in enumerate(free.tolist()) if f >= milli][:count]
        if len(fits) == count:
            index = "-".join(str(i) for i in fits)
            table.add_pod(PodInfo.from_raw(gpu_pod(name, milli, count=count, cpu=rng.choice(["1", "2"]),
                                                   node_name=table.names[row], index=index)))
            return


@pytest.mark.parametrize("copies", [1, 6])
def test_fgd_scores_kept_per_node_state_equal_a_fresh_plugins(copies: int) -> None:
    """Pods come and go, a node of a new GPU model arrives: the plugin that kept its scores (per
    row and per node state, many nodes alike) scores and chooses GPUs as one that never scored.
    With 36 nodes the fresh plugin scores them all at once (each distinct state once, with
    arrays), the kept one the few changed rows in Python."""
    table = table_of(*[gpu_node(f"n{i}", gpus=g, cpu=c) for i, (g, c) in
                       enumerate([(4, "8"), (4, "8"), (4, "8"), (8, "16"), (8, "16"), (2, "4")] * copies)])
    kept = new_plugin(FGD, {"typicalPods": SHAPES}, table=table)
    first = PodInfo.from_raw(gpu_pod("first", 500))
    kept.score_batch(CycleState(), first, table, table.alive_rows())
    assert [len(c.by_state) for c in kept._cache.values()] == [3]  # six rows, three states
    rng = random.Random(11)
    placed: list[str] = []
    for step in range(60):
        if step == 30:
            table.upsert_node(gpu_node("t4", gpus=4, model="T4", cpu="8"))
        if placed and rng.random() < 0.3:
            table.remove_pod(_uid_of(table, placed.pop(rng.randrange(len(placed)))))
        else:
            _place(table, rng, f"p{step}")
            placed.append(f"p{step}")
        milli = rng.choice([250, 500, 1000])
        pod = PodInfo.from_raw(gpu_pod(f"q{step}", milli, cpu=rng.choice(["1", "4"])))
        rows = table.alive_rows()
        fresh = new_plugin(FGD, {"typicalPods": SHAPES}, table=table)
        got, want = kept.score_batch(CycleState(), pod, table, rows), fresh.score_batch(CycleState(), pod, table, rows)
        assert isinstance(got, np.ndarray) and isinstance(want, np.ndarray)
        assert got.tolist() == want.tolist(), step
        request = parse_gpu_request(pod)
        assert request is not None
        ledger = GpuLedger.of(table)
        for row in rows.tolist():
            free = ledger.free_without(pod, row)
            assert kept.choose_gpus(pod, request, row, free) == fresh.choose_gpus(pod, request, row, free)


def test_fgd_scores_of_a_few_states_in_python_equal_the_array_scores() -> None:
    """FGD scores a few states in Python and many with arrays: on nodes of 2, 4 and 8 GPUs and
    two models, pods placed at random, share, whole-GPU and CPU pods, any model or one: both
    give every node the same score and the same best GPU."""
    table = table_of(*[gpu_node(f"n{i}", gpus=g, cpu=c, model=m) for i, (g, c, m) in
                       enumerate([(4, "8", "V100"), (8, "16", "V100"), (2, "4", "T4"), (8, "96", "T4"),
                                  (4, "32", "V100"), (1, "8", "T4")])])
    plugin = new_plugin(FGD, {"typicalPods": SHAPES}, table=table)
    rng = random.Random(3)
    for step in range(40):
        _place(table, rng, f"p{step}")
        rows = table.alive_rows()
        res = node_resources(table, rows)
        assert fgd_module._row_state_keys(table, rows.tolist()) == fgd_module._state_keys(res)  # read in Python
        shapes = ((250, 1, None), (500, 1, "T4"), (1000, 1, None), (1000, 2, "V100"), (None, 1, None))
        for milli, count, model in shapes:
            pod = PodInfo.from_raw(gpu_pod(f"q{step}", milli, count=count, model=model,
                                           cpu=rng.choice(["1", "4", "12"])))
            arrays = plugin._scores(table, pod, res)
            python = plugin._scores_of_keys(table, pod, fgd_module._state_keys(res))
            assert (arrays[0].tolist(), arrays[1].tolist()) == python, (step, milli, count, model)


def _uid_of(table: NodeTable, name: str) -> str:
    for pod in table.all_pods():
        if pod.name == name:
            return pod.uid
    raise KeyError(name)


def test_replay_gpu_sums_follow_every_change_the_ledger_sees() -> None:
    """The replay's GPU capacity, allocated and idle milli, kept per row and refreshed for the rows
    the ledger reports: after pods come and go and nodes go and come, equal to sums made from
    scratch (a few rows changed are read one by one, all of them at once: 20 nodes)."""
    sizes = [(4, "8"), (8, "16"), (2, "4"), (8, "96")] * 5
    table = table_of(*[gpu_node(f"n{i}", gpus=g, cpu=c) for i, (g, c) in enumerate(sizes)])
    kept = GpuMetrics(table, TYPICAL)
    rng = random.Random(3)
    placed: list[str] = []
    for step in range(40):
        if step == 15:
            gone = [p.name for p in table.all_pods() if p.node_name == "n1"]
            table.remove_node("n1")
            placed = [name for name in placed if name not in gone]
        if step == 25:
            table.upsert_node(gpu_node("n9", gpus=4))
        if placed and rng.random() < 0.35:
            table.remove_pod(_uid_of(table, placed.pop(rng.randrange(len(placed)))))
        else:
            _place(table, rng, f"p{step}")
            placed.append(f"p{step}")
        assert kept.totals() == GpuMetrics(table, TYPICAL).totals(), step
        rows = table.alive_rows()  # the ledger's free milli per node, kept per row as well
        assert kept.ledger.free_totals(rows).tolist() == kept.ledger.free(rows).sum(axis=1).tolist(), step
        assert kept.fragmented() == GpuMetrics(table, TYPICAL).fragmented(), step
