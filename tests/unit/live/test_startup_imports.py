"""What `kubesched run` imports before its first request (issue 32: the first bind after a restart
waits for it): the default profile's scheduler built in a fresh process, as run_command builds it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.startup_cost import RUN_STARTUP_SCRIPT, unreachable_kubeconfig  # noqa: E402

#: The start-up bench's script (the default profile's scheduler built as run_command builds it),
#: then the modules it imported.
_SCRIPT = RUN_STARTUP_SCRIPT + 'print(" ".join(sorted(sys.modules)))\n'


def _imported_by_run(tmp_path: Path) -> set[str]:
    kubeconfig = unreachable_kubeconfig(tmp_path)
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(kubeconfig)], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def test_run_without_dra_objects_does_not_import_the_cel_evaluator_nor_other_shells(tmp_path: Path) -> None:
    modules = _imported_by_run(tmp_path)
    assert "kubesched.plugins.dynamicresources.plugin" in modules  # the default profile enables it
    assert not {m for m in modules if m.split(".")[0] in ("celpy", "lark", "pendulum")}
    assert not {m for m in modules if m.startswith(("kubesched.simulate", "kubesched.extender", "rich", "dask"))}


def test_a_selector_compiled_in_a_fresh_process_matches_a_device() -> None:
    """celpy is imported by the first selector or device variable, whichever comes first."""
    script = """
from kubesched.plugins.dynamicresources.cel import compile_selector, device_variable
sel = compile_selector('device.attributes["gpu.example.com"].model == "a100" && '
                       'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))')
dev = device_variable("gpu.example.com", {"attributes": {"model": {"string": "a100"}},
                                          "capacity": {"memory": {"value": "80Gi"}}})
print(sel.matches(dev), compile_selector('has(device.attributes["other.example.com"].x)').matches(dev))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def test_the_first_cycle_after_a_start_imports_no_masked_arrays() -> None:
    """np.unique without return_* imports numpy.ma (~0.02 s): the first scheduling cycle after a
    start, on nodes where the pod does not fit, would wait for it before its bind."""
    script = """
import asyncio, sys
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.testing import node, pod_info

class Api:
    bound = []
    async def bind(self, pod, node_name):
        self.bound.append(node_name)

async def main():
    registry = builtin_registry()
    api = Api()
    sched = Scheduler.build(load_config(None, registry).profiles, registry, FakeClock(), client=api)
    sched.on_node_add_or_update(node("small", cpu="1"))
    sched.on_node_add_or_update(node("big", cpu="64"))
    sched.on_pod_add(pod_info("p", cpu="8"))
    sched.schedule_one()
    await sched.drain()
    print(api.bound, "numpy.ma" in sys.modules)

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['big']", "False"]


def test_the_backlog_informers_can_start_before_the_framework_is_imported(tmp_path: Path) -> None:
    # `kubesched run` sends the nodes' and pods' watch-lists before it decodes its configuration
    # (live/early.py): what it imports up to then must not include the framework, the plugins,
    # numpy or pydantic, or the apiserver's work would again wait for them (~0.25 s: live/settings.py
    # once imported them through the leader elector). The command itself is run, up to that point.
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    script = (
        "import os, sys\n"
        "import kubesched.live.early as early\n"
        "async def start(cls, *args, **kwargs):\n"
        "    print(' '.join(sorted(sys.modules)), flush=True)\n"
        "    os._exit(0)\n"
        "early.EarlyInformers.start = classmethod(start)\n"
        "from kubesched.cli import main\n"
        f"sys.argv = ['kubesched', 'run', '--config', {str(config)!r}]\n"
        "main()\n"
    )
    modules = set(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                 check=True).stdout.split())
    assert {"kubesched.live.early", "kubesched.live.settings", "kubesched.kube.api"} <= modules
    heavy = {"numpy", "pydantic", "kubesched.framework", "kubesched.plugins", "kubesched.app.startup",
             "kubesched.config", "aiohttp.web"}
    assert not heavy & modules
