"""A plugin that raises: the message names the extension point, the plugin and where the exception
was raised, in upstream's wording, in every shell's path (the scheduling cycle that the simulator
and `kubesched run` share, `--explain`, and the extender); `--debug` shows the traceback; the
summary counts the pod as an error, in its own table."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.config.load import load_config_text
from kubesched.extender.requests import Deadline
from kubesched.extender.service import ExtenderService
from kubesched.framework import CycleState, FilterPlugin, NodeInfo, PodInfo, Status
from kubesched.framework.clock import FakeClock
from kubesched.framework.registry import Registry
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import ScheduleFailure, Scheduler, SchedulerObserver
from kubesched.testing import node, pod

PLUGIN_SOURCE = '''
from kubesched.framework import FilterPlugin, Status

RACKS = {"r1": 2}


class RackCap(FilterPlugin):
    name = "RackCap"

    def filter(self, state, pod, node):
        return Status() if RACKS[node.labels["rack"]] > 0 else Status.unschedulable("rack full")


PLUGINS = [RackCap]
'''

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: racks
    plugins:
      filter:
        enabled: [{name: RackCap}]
"""


class RackCap(FilterPlugin):
    name = "RackCap"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status() if {"r1": 2}[node.labels["rack"]] > 0 else Status.unschedulable("rack full")


def _registry() -> Registry:
    registry = builtin_registry()
    registry.register(RackCap)
    return registry


class _Failures(SchedulerObserver):
    def __init__(self) -> None:
        self.failures: list[ScheduleFailure] = []

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.failures.append(failure)


def test_the_scheduling_cycle_names_point_plugin_and_location() -> None:
    """The message `kubesched run` puts in its FailedScheduling event and the simulator records."""
    registry = _registry()
    config = load_config_text(CONFIG, registry)
    seen = _Failures()
    sched = Scheduler.build(config.profiles, registry, FakeClock(), observer=seen)
    sched.on_node_add_or_update(node("n1", labels={"rack": "r1x"}))
    sched.on_pod_add(PodInfo.from_raw(pod("web-1", scheduler_name="racks")))
    assert sched.schedule_one()
    (failure,) = seen.failures
    assert not failure.unschedulable
    assert failure.message.startswith('running "RackCap" filter plugin: KeyError: \'r1x\' (test_plugin_errors.py:')
    assert failure.message.endswith(" in filter)")
    assert isinstance(failure.status.exception, KeyError)


def test_the_extender_answers_with_the_same_message() -> None:
    registry = _registry()
    svc = ExtenderService(load_config_text(CONFIG, registry).profiles[0], registry)
    n1 = node("n1", labels={"rack": "r1x"})
    n1["metadata"]["resourceVersion"] = "1"
    body = {"Pod": pod("web-1", scheduler_name="racks"), "Nodes": {"items": [n1]}}
    reply = svc.filter(body, Deadline("filter", 5))
    error = orjson.loads(reply.body)["Error"]
    assert error.startswith('running "RackCap" filter plugin: KeyError: \'r1x\' (test_plugin_errors.py:')


def _cli(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "rackcap.py").write_text(PLUGIN_SOURCE)
    (tmp_path / "config.yaml").write_text(CONFIG)
    cluster = tmp_path / "cluster.yaml"
    items = [node("n1", labels={"rack": "r1x"}), pod("web-1", scheduler_name="racks"),
             pod("web-2", scheduler_name="racks")]
    cluster.write_text(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}).decode())
    result = CliRunner().invoke(
        main,
        ["simulate", "--plugins", str(tmp_path / "rackcap.py"), "--config", str(tmp_path / "config.yaml"),
         "--cluster", str(cluster), *extra],
        catch_exceptions=False,
        env={"COLUMNS": "200"},  # whole lines to search (piped output is otherwise 100 wide)
    )
    return result.exit_code, result.stdout, result.stderr


def test_simulate_summary_counts_errors_apart_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    code, out, err = _cli(tmp_path, "--debug")
    assert code == 0, out + err
    assert "Pods that failed with an error: 2" in out
    assert "Unschedulable pods" not in out
    assert 'running "RackCap" filter plugin: KeyError: \'r1x\' (rackcap.py:' in out
    assert "Traceback (most recent call last)" in err
    assert 'rackcap.py", line' in err


def test_simulate_without_debug_prints_no_traceback(tmp_path: Path) -> None:
    code, out, err = _cli(tmp_path)
    assert code == 0
    assert "Traceback" not in out + err


def test_explain_shows_the_error_and_keeps_the_summary(tmp_path: Path) -> None:
    code, out, err = _cli(tmp_path, "--explain", "default/web-1")
    assert code == 0, out + err
    assert "Pods that failed with an error: 2" in out  # the summary is not lost
    assert "KeyError: 'r1x' (rackcap.py:" in out  # the explanation shows the plugin's error per node
