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
