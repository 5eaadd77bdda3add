"""Registry, Framework construction and the per-point runners (framework/registry.py, runtime.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.feasible_nodes import num_feasible_nodes_to_find
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.registry import Registry, RegistryError
from kubesched.framework.runtime import Framework, FrameworkError
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PostFilterResult, PreFilterResult, QueuedPodInfo
from kubesched.framework.waiting import WaitingPods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows
from kubesched.testing import StaticProfile, node, pod_info, table_of

# ---------------------------------------------------------------------------------------------
# numFeasibleNodesToFind
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (None, 50, 50),  # fewer than 100 nodes: all of them
        (None, 99, 99),
        (None, 100, 100),  # 50 % of 100 is 50, raised to the 100 minimum
        (None, 1000, 420),  # 50 - 1000/125 = 42 %
        (0, 1000, 420),  # 0 means adaptive too
        (None, 5000, 500),  # 50 - 40 = 10 %
        (None, 6000, 300),  # 50 - 48 = 2 %, floored at 5 %
        (None, 10000, 500),
        (100, 1000, 1000),
        (100, 5000, 5000),
        (30, 1000, 300),
        (5, 1000, 100),  # 50 nodes, raised to the minimum
        (10, 50, 50),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


# ---------------------------------------------------------------------------------------------
# Plugins
# ---------------------------------------------------------------------------------------------


class Sort(QueueSortPlugin):
    name: ClassVar[str] = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Bind(BindPlugin):
    name: ClassVar[str] = "Bind"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


class SkipBind(BindPlugin):
    name: ClassVar[str] = "SkipBind"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status.skip()


class NoFilterMethod(FilterPlugin):
    name: ClassVar[str] = "NoFilterMethod"


class NoScoreMethod(ScorePlugin):
    name: ClassVar[str] = "NoScoreMethod"


class NotAPoint(Plugin):
    name: ClassVar[str] = "NotAPoint"


class Multi(PreFilterPlugin, FilterPlugin, ScorePlugin):
    """One plugin at three points (multiPoint)."""

    name: ClassVar[str] = "Multi"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        state.write("Multi", 7)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if state.read("Multi") == 7 else Status.error("no state")

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 1, SUCCESS

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(NODE, ActionType.ADD),)


class Small(FilterPlugin):
    """Rejects rows named small*; records the rows it was asked about."""

    name: ClassVar[str] = "Small"

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        self.asked: list[list[str]] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        self.asked.append([node.name])
        return Status.unschedulable("too small") if node.name.startswith("small") else SUCCESS


class Odd(FilterPlugin):
    name: ClassVar[str] = "Odd"

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        self.asked: list[str] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        self.asked.append(node.name)
        return Status.unschedulable("odd") if node.name.endswith(("1", "3")) else SUCCESS


def handle(table: NodeTable | None = None) -> Handle:
    return Handle(table or NodeTable(), FakeClock(), WaitingPods())


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def test_registry_rejects_duplicate_names() -> None:
    r = Registry([Sort])
    with pytest.raises(RegistryError, match="'Sort' already exists"):
        r.register(Sort)
    r.register(Sort, name="Sort2")  # the same class under another name is fine
    assert r.names() == ["Sort", "Sort2"]
    with pytest.raises(RegistryError, match="already exists"):
        r.merge(Registry([Sort]))


def test_registry_rejects_filter_without_filter_or_filter_batch() -> None:
    with pytest.raises(RegistryError, match=r"NoFilterMethod.*filter\(\) or filter_batch\(\)"):
        Registry([NoFilterMethod])


def test_registry_rejects_score_without_score_or_score_batch() -> None:
    with pytest.raises(RegistryError, match="score\\(\\) or score_batch\\(\\)"):
        Registry([NoScoreMethod])


def test_registry_rejects_nameless_and_pointless_plugins() -> None:
    class Nameless(Sort):
        name: ClassVar[str] = ""

    with pytest.raises(RegistryError, match="no name"):
        Registry([Nameless])
    with pytest.raises(RegistryError, match="no extension point"):
        Registry([NotAPoint])


def test_registry_lookup() -> None:
    r = Registry([Sort, Bind])
    assert r.get("Sort") is Sort and r.get("Nope") is None
    assert "Bind" in r and list(r) == ["Bind", "Sort"]


# ---------------------------------------------------------------------------------------------
# Framework construction
# ---------------------------------------------------------------------------------------------


def test_missing_queue_sort_is_rejected() -> None:
    h = handle()
    with pytest.raises(FrameworkError, match="'prof': exactly one queueSort plugin is required, got 0"):
        Framework("prof", {"bind": [Bind(None, h)]}, {}, h)
    with pytest.raises(FrameworkError, match="got 2"):
        Framework("prof", {"queueSort": [Sort(None, h), Sort(None, h)], "bind": [Bind(None, h)]}, {}, h)


def test_missing_bind_is_rejected() -> None:
    h = handle()
    with pytest.raises(FrameworkError, match="'prof': at least one bind plugin is required"):
        Framework("prof", {"queueSort": [Sort(None, h)]}, {}, h)
    with pytest.raises(FrameworkError, match="at least one bind plugin"):
        Framework.build(StaticProfile({"queueSort": ["Sort"]}), Registry([Sort]), h)


def test_plugin_at_a_point_it_does_not_serve_is_rejected() -> None:
    h = handle()
    with pytest.raises(FrameworkError, match="plugin 'Sort' does not extend filter"):
        Framework.build(
            StaticProfile({"queueSort": ["Sort"], "filter": ["Sort"], "bind": ["Bind"]}), Registry([Sort, Bind]), h
        )


def test_build_errors_name_the_problem() -> None:
    h = handle()
    reg = Registry([Sort, Bind, Multi])
    with pytest.raises(FrameworkError, match="plugin 'Missing' is not registered; known plugins: Bind, Multi, Sort"):
        Framework.build(StaticProfile({"queueSort": ["Sort"], "filter": ["Missing"], "bind": ["Bind"]}), reg, h)
    with pytest.raises(FrameworkError, match="unknown extension point 'filters'"):
        Framework.build(StaticProfile({"queueSort": ["Sort"], "filters": ["Multi"], "bind": ["Bind"]}), reg, h)
    with pytest.raises(FrameworkError, match="'Multi' already registered at filter"):
        Framework.build(StaticProfile({"queueSort": ["Sort"], "filter": ["Multi", "Multi"], "bind": ["Bind"]}), reg, h)


def test_multi_point_plugin_is_one_instance_sharing_cycle_state() -> None:
    t = table_of(node("a"), node("b"))
    h = handle(t)
    f = Framework.build(
        StaticProfile(
            {"queueSort": ["Sort"], "preFilter": ["Multi"], "filter": ["Multi"], "score": ["Multi"], "bind": ["Bind"]},
            plugin_args={"Multi": {"x": 1}},
        ),
        Registry([Sort, Bind, Multi]),
        h,
    )
    assert f.pre_filter[0] is f.filter[0] is f.score[0] is f.plugins["Multi"]
    assert f.plugins["Multi"].args == {"x": 1} and f.plugins["Multi"].handle is h
    state = CycleState()
    p = pod_info("p")
    _, st = f.run_pre_filter(state, p)
    assert st.is_success
    passing, st = f.run_filters(state, p, t.alive_rows(), Diagnosis())
    assert st.is_success and len(passing) == 2
    assert f.events_to_register() == {"Multi": [ClusterEvent(NODE, ActionType.ADD)]}


# ---------------------------------------------------------------------------------------------
# Runners
# ---------------------------------------------------------------------------------------------


def framework(t: NodeTable, **points: list[Plugin]) -> Framework:
    h = handle(t)
    for instances in points.values():
        for p in instances:
            p.handle = h
    return Framework("p", {"queueSort": [Sort(None, h)], "bind": [Bind(None, h)], **points}, {}, h)


def test_filters_stop_at_the_first_rejection_per_node() -> None:
    t = table_of(node("small1"), node("big2"), node("big3"), node("small4"))
    h = handle(t)
    small, odd = Small(None, h), Odd(None, h)
    f = framework(t, filter=[small, odd])
    d = Diagnosis()
    passing, st = f.run_filters(CycleState(), pod_info("p"), t.alive_rows(), d)
    assert st.is_success
    assert t.node_names(passing) == ["big2"]
    assert odd.asked == ["big2", "big3"], "the second filter only sees nodes the first let through"
    assert {t.names[r]: s.reasons for r, s in d.node_to_status.items()} == {
        "small1": ("too small",),
        "small4": ("too small",),
        "big3": ("odd",),
    }
    assert {s.plugin for _, s in d.node_to_status.items()} == {"Small", "Odd"}
    assert d.unschedulable_plugins == {"Small", "Odd"}


class ErrFilter(FilterPlugin):
    name: ClassVar[str] = "ErrFilter"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status.error("disk on fire") if node.name == "b" else SUCCESS


def test_filter_error_aborts_with_the_plugin_named() -> None:
    t = table_of(node("a"), node("b"))
    f = framework(t, filter=[ErrFilter(None, handle(t))])
    passing, st = f.run_filters(CycleState(), pod_info("p"), t.alive_rows(), Diagnosis())
    assert st.code == Code.ERROR and st.plugin == "ErrFilter" and len(passing) == 0


class Normalizing(ScorePlugin):
    name: ClassVar[str] = "Normalizing"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores:
        return np.array([1000, 500, 0], dtype=np.int64)[: len(rows)]

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        scores //= 10
        return SUCCESS


def test_scores_are_checked_after_normalize() -> None:
    t = table_of(node("a"), node("b"), node("c"))
    h = handle(t)
    f = Framework(
        "p",
        {"queueSort": [Sort(None, h)], "bind": [Bind(None, h)], "score": [Normalizing(None, h)]},
        {"Normalizing": 2},
        h,
    )
    scored = f.run_score(CycleState(), pod_info("p"), t.alive_rows())
    assert not isinstance(scored, Status)
    assert scored.totals.tolist() == [200, 100, 0]
    assert scored.by_plugin["Normalizing"].tolist() == [200, 100, 0]


class NegativeScore(ScorePlugin):
    name: ClassVar[str] = "NegativeScore"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return -1, SUCCESS


def test_negative_score_is_an_error() -> None:
    t = table_of(node("a"), node("b"))
    f = framework(t, score=[NegativeScore(None, handle(t))])
    st = f.run_score(CycleState(), pod_info("p"), t.alive_rows())
    assert isinstance(st, Status) and st.code == Code.ERROR and "invalid score -1" in st.message


class FailingScore(ScorePlugin):
    name: ClassVar[str] = "FailingScore"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        return Status.error("no score")


class TooHigh(ScorePlugin):
    name: ClassVar[str] = "TooHigh"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 101, SUCCESS


def test_range_check_follows_every_score_and_names_the_first_plugin_out_of_range() -> None:
    """As upstream's RunScorePlugins: every Score runs before the range check (a later plugin's
    Score error wins over an earlier plugin's bad score), which names the first plugin, in Score
    order, with a score out of range."""
    t = table_of(node("a"), node("b"))
    h = handle(t)
    st = framework(t, score=[NegativeScore(None, h), FailingScore(None, h)]).run_score(
        CycleState(), pod_info("p"), t.alive_rows()
    )
    assert isinstance(st, Status) and st.plugin == "FailingScore" and st.message == "no score"
    cases = (([NegativeScore, TooHigh], "NegativeScore", -1), ([TooHigh, NegativeScore], "TooHigh", 101))
    for plugins, first, bad in cases:
        f = framework(t, score=[cls(None, h) for cls in plugins])
        st = f.run_score(CycleState(), pod_info("p"), t.alive_rows())
        assert isinstance(st, Status) and st.code == Code.ERROR and st.plugin == first
        assert st.message == (
            f'plugin "{first}" returns an invalid score {bad}, it should in the range of [0, 100] after normalizing'
        )


async def test_bind_skip_falls_through_to_the_next_binder_and_all_skip_is_an_error() -> None:
    t = table_of(node("a"))
    h = handle(t)
    f = Framework("p", {"queueSort": [Sort(None, h)], "bind": [SkipBind(None, h), Bind(None, h)]}, {}, h)
    st = await f.run_bind(CycleState(), pod_info("p"), "a")
    assert st.is_success and st.plugin == "Bind"
    f2 = Framework("p", {"queueSort": [Sort(None, h)], "bind": [SkipBind(None, h)]}, {}, h)
    st2 = await f2.run_bind(CycleState(), pod_info("p"), "a")
    assert st2.is_error and "all returned Skip" in st2.message


class PF(PostFilterPlugin):
    name: ClassVar[str] = "PF"

    def post_filter(self, state: CycleState, pod: PodInfo, d: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        return self.args


class PF2(PF):
    name: ClassVar[str] = "PF2"


def test_post_filter_first_success_wins_and_reasons_accumulate() -> None:
    t = table_of(node("a"))
    h = handle(t)

    def run(first: Any, second: Any) -> tuple[PostFilterResult | None, Status]:
        f = Framework(
            "p",
            {"queueSort": [Sort(None, h)], "bind": [Bind(None, h)], "postFilter": [PF(first, h), PF2(second, h)]},
            {},
            h,
        )
        return f.run_post_filter(CycleState(), pod_info("p"), Diagnosis())

    nominated = PostFilterResult("a")
    r, st = run((None, Status.unschedulable("no victims")), (nominated, SUCCESS))
    assert st.is_success and r is nominated and st.plugin == "PF2"
    r, st = run((None, Status.unschedulable("x")), (None, Status.unschedulable("y")))
    assert r is None and st.code == Code.UNSCHEDULABLE and st.reasons == ("x", "y")
    r, st = run((None, Status.unresolvable("stop")), (nominated, SUCCESS))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.plugin == "PF"
    r, st = run((None, Status.error("boom")), (nominated, SUCCESS))
    assert st.is_error and r is None


class WaitPermit(PermitPlugin):
    name: ClassVar[str] = "WaitPermit"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return self.args


class WaitPermit2(WaitPermit):
    name: ClassVar[str] = "WaitPermit2"


def test_run_permit_wait_registers_a_waiting_pod() -> None:
    t = table_of(node("a"))
    clock = FakeClock(10.0)
    h = Handle(t, clock, WaitingPods())
    f = Framework(
        "p",
        {
            "queueSort": [Sort(None, h)],
            "bind": [Bind(None, h)],
            "permit": [WaitPermit((Status.wait(), 5.0), h), WaitPermit2((SUCCESS, 0.0), h)],
        },
        {},
        h,
    )
    p = pod_info("p")
    st = f.run_permit(CycleState(), p, "a")
    assert st.is_wait
    wp = h.waiting_pods.get(p.uid)
    assert wp is not None and wp.deadlines == {"WaitPermit": 15.0} and wp.node_name == "a"


def test_run_permit_rejection_beats_an_earlier_wait_and_errors_are_wrapped() -> None:
    t = table_of(node("a"))
    h = handle(t)
    f = Framework(
        "p",
        {
            "queueSort": [Sort(None, h)],
            "bind": [Bind(None, h)],
            "permit": [WaitPermit((Status.wait(), 5.0), h), WaitPermit2((Status.unschedulable("nope"), 0.0), h)],
        },
        {},
        h,
    )
    p = pod_info("p")
    st = f.run_permit(CycleState(), p, "a")
    assert st.is_rejected and st.plugin == "WaitPermit2"
    assert h.waiting_pods.get(p.uid) is None
    f2 = Framework(
        "p",
        {
            "queueSort": [Sort(None, h)],
            "bind": [Bind(None, h)],
            "permit": [WaitPermit((Status.error("kaput"), 0.0), h)],
        },
        {},
        h,
    )
    st2 = f2.run_permit(CycleState(), p, "a")
    assert st2.is_error and "WaitPermit" in st2.message and "kaput" in st2.message


def test_cycle_state_clone_is_independent() -> None:
    class Data:
        def __init__(self, n: int) -> None:
            self.n = n

        def clone(self) -> Data:
            return Data(self.n)

    s = CycleState()
    s.write("d", Data(1))
    s.write("plain", [1])
    s.skip_filter_plugins.add("X")
    c = s.clone()
    c.read("d").n = 2
    c.skip_filter_plugins.add("Y")
    assert s.read("d").n == 1 and s.skip_filter_plugins == {"X"}
    assert c.read("plain") is s.read("plain")
    with pytest.raises(KeyError, match="no key 'missing'"):
        s.read("missing")
