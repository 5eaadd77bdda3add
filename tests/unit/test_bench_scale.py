"""The live harness's custom sizes (``--nodes/--pods``: the 15,000-node run), its per-round
profile summaries, and the failover-with-a-backlog scenario's audit check. No control plane here:
the live runs themselves are in BENCHMARKS.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import chaos, live, live_profile  # noqa: E402
from bench.chaos_failover_backlog import double_bound  # noqa: E402
from bench.chaos_watch import Binding  # noqa: E402


def test_custom_size_overrides_only_what_is_given() -> None:
    base = live.SIZES["full"]
    assert live.custom_size(base, None, None, None, None) is None
    big = live.custom_size(base, 15000, 30000, 1000, None)
    assert big == live.Size(nodes=15000, init_pods=1000, pods=30000, timeout=1000)  # 30,000 pods at 30/s
    small = live.custom_size(base, 20, None, None, 60)
    assert small == live.Size(nodes=20, init_pods=20, pods=base.pods, timeout=60)  # one init pod per node at most


@pytest.mark.parametrize(("args", "flag"), [((0, 10, 0), "--nodes"), ((10, 0, 0), "--pods"),
                                            ((10, 10, -1), "--init-pods")])
def test_custom_size_refuses_a_count_that_cannot_run(args: tuple[int, int, int], flag: str) -> None:
    with pytest.raises(SystemExit, match=flag):
        live.custom_size(live.SIZES["small"], *args, None)


def test_the_command_line_takes_a_custom_size(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake_run(name: str, size_name: str, *a: object, **kw: object) -> dict[str, object]:
        seen.update(name=name, size_name=size_name, size=kw["size"], profile=kw["profile_seconds"],
                    results=kw["results"])
        return {}

    monkeypatch.setattr(live, "run_workload", fake_run)
    live.main(["--nodes", "15000", "--pods", "30000", "--init-pods", "1000", "--profile-seconds", "30",
               "--results", "out.json"], "SchedulingBasic")
    assert seen == {"name": "SchedulingBasic", "size_name": "custom",
                    "size": live.Size(nodes=15000, init_pods=1000, pods=30000, timeout=1000),
                    "profile": 30.0, "results": Path("out.json")}


def test_pprof_top_rows_are_read() -> None:
    text = """File: kube-scheduler
Type: cpu
Showing nodes accounting for 1.20s, 60.00% of 2s total
      flat  flat%   sum%        cum   cum%
     0.40s 20.00% 20.00%      0.40s 20.00%  runtime.scanObject
     0.20s 10.00% 30.00%      1.10s 55.00%  k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne
"""
    assert live_profile.parse_pprof_top(text) == [
        {"function": "runtime.scanObject", "flat_percent": 20.0, "cum_percent": 20.0},
        {"function": "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne", "flat_percent": 10.0,
         "cum_percent": 55.0},
    ]


def test_a_pod_bound_twice_in_the_audit_log_is_reported() -> None:
    def b(pod: str, code: int, at: float, user: str = "a") -> Binding:
        return Binding(user=user, namespace="ns", pod=pod, code=code, at=at)

    log = [b("p1", 201, 1.0), b("p2", 201, 2.0), b("p2", 409, 3.0, "b"), b("p3", 201, 4.0), b("p3", 201, 9.0, "b")]
    assert double_bound(log) == ["p3 bound 2 times"]  # a refused second bind (409) is not a double bind


def test_failover_backlog_is_a_chaos_scenario_with_a_kube_scheduler_reference() -> None:
    assert "failover-backlog" in chaos.SCENARIOS
    assert "failover-backlog-kube-scheduler" in chaos.REFERENCE
    full = chaos.SIZES["full"]
    assert full.failover_backlog - full.failover_backlog_head >= 10000  # 10,000 pending at the kill
    assert full.failover_backlog <= full.failover_backlog_nodes * 110  # every pod fits


def test_profile_areas_do_not_count_every_stack_of_kubesched_run_as_start_up() -> None:
    from bench.profile import analyse

    root = ("<module> (kubesched:6);_LazyGroup.__call__ (kubesched/cli.py:24);"
            "run_command (kubesched/live/commands.py:101)")
    raw = "\n".join([
        f"{root};SSLProtocol._do_handshake (asyncio/sslproto.py:563);SSLObject.do_handshake (ssl.py:979) 3",
        f"{root};Handle._run (asyncio/events.py:80);EpollSelector.select (selectors.py:468) 1",
        f"{root};load_config (kubesched/config/load.py:10) 1",
    ])
    areas = {b["area"].split(" (")[0]: b["samples"] for b in analyse(raw)["buckets"]}
    assert areas == {"TLS handshakes": 3, "event loop, TLS and HTTP plumbing": 1, "start-up": 1}
