"""What a sweep sends to workers that do not share this machine's files (simulate/whatif/sweep_files.py): the
inputs are read here, written back on the worker's side, and the job's result (or error) is the one
the original paths give."""

from __future__ import annotations

import shutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesched.simulate.whatif.sweep import OUTCOME_FIELDS, SweepJob, jobs_for, run_job
from kubesched.simulate.whatif.sweep_files import (
    SweepJobError,
    _forget_stale_plugin_module,
    input_paths,
    materialize,
    read_input,
    remove_sweep_dir,
    run_shipped_job,
    sweep_dir,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "plugins" / "domain_cap"


def test_a_file_and_a_directory_come_back_as_they_were(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("kind: List\n")
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    (pkg / "sub" / "m.py").write_text("Y = 2\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    (pkg / ".hidden").write_text("secret")
    file, directory = read_input(str(tmp_path / "c.yaml")), read_input(str(pkg))
    assert [name for name, _ in directory.files] == ["__init__.py", "sub/m.py"]

    dest = tmp_path / "worker"
    f, d = materialize(file, dest), materialize(directory, dest)
    assert f.name == "c.yaml" and f.read_text() == "kind: List\n"
    assert d.name == "pkg" and (d / "sub" / "m.py").read_text() == "Y = 2\n" and not (d / "__pycache__").exists()
    assert materialize(file, dest) == f  # written once per sweep and machine
    # Other contents, other copy (a changed plugin never reuses an old one).
    (tmp_path / "c.yaml").write_text("kind: List\nitems: []\n")
    changed = read_input(str(tmp_path / "c.yaml"))
    assert changed.digest != file.digest and materialize(changed, dest) != f


def test_a_job_reads_its_config_cluster_and_plugin_paths_but_not_module_names() -> None:
    job = SweepJob(0, "a.yaml", ("pkg_dir_that_does_not_exist", "plug.py"), "c.yaml", None, None, 1)
    assert input_paths(job) == ["a.yaml", "c.yaml", "plug.py"]
    assert input_paths(SweepJob(1, None, (), None, 10, 20, 1)) == []


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The DomainCap example under a module name of its own (no other test imports it), in a client
    directory the jobs name relatively."""
    client = tmp_path / "client"
    shutil.copytree(EXAMPLE, client / "domain_cap_shipped", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(client)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield client
    for name in [m for m in sys.modules if m.split(".")[0] == "domain_cap_shipped"]:
        del sys.modules[name]


def test_a_shipped_job_gives_the_result_of_the_job_on_the_original_files(example: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    [job] = jobs_for(["domain_cap_shipped/config.yaml"], ("domain_cap_shipped",),
                     ["domain_cap_shipped/cluster.yaml"], [], [3])
    sent = [read_input(p) for p in input_paths(job)]
    expected = run_job(job)
    # The worker: elsewhere, the originals out of reach.
    for name in [m for m in sys.modules if m.split(".")[0] == "domain_cap_shipped"]:
        del sys.modules[name]
    shutil.rmtree(example / "domain_cap_shipped")
    monkeypatch.chdir(example.parent)
    try:
        got = run_shipped_job(job, sent, "unit-test")
        assert sweep_dir("unit-test").is_dir()
    finally:
        remove_sweep_dir("unit-test")
    assert not sweep_dir("unit-test").exists()
    assert {k: got[k] for k in OUTCOME_FIELDS} == {k: expected[k] for k in OUTCOME_FIELDS}
    assert (got["scheduled"], got["unschedulable"]) == (5, 2)  # DomainCap ran: 2 licensed pods held back
    assert (got["config"], got["cluster"], got["plugin_modules"]) == (
        "domain_cap_shipped/config.yaml", "domain_cap_shipped/cluster.yaml", ("domain_cap_shipped",))
    assert (got["configLabel"], got["clusterLabel"]) == (expected["configLabel"], expected["clusterLabel"])
    assert sys.modules["domain_cap_shipped"].__file__.startswith(str(sweep_dir("unit-test")))


def test_an_error_on_a_worker_names_the_file_as_the_user_gave_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("broken.yaml").write_text("apiVersion: v1\nkind: Node\nspec: [1\n")
    [job] = jobs_for([None], (), ["broken.yaml"], [], [1])
    try:
        with pytest.raises(SweepJobError) as e:
            run_shipped_job(job, [read_input("broken.yaml")], "unit-test-error")
    finally:
        remove_sweep_dir("unit-test-error")
    assert str(e.value).startswith("broken.yaml: line ") and "kubesched-sweep" not in str(e.value)


def test_a_plugin_module_from_an_earlier_sweep_is_imported_again(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "sweep-2" / "abc" / "myplugin.py"
    old = types.ModuleType("myplugin")
    old.__file__ = str(tmp_path / "sweep-1" / "abc" / "myplugin.py")
    monkeypatch.setitem(sys.modules, "myplugin", old)
    monkeypatch.setitem(sys.modules, "myplugin.sub", types.ModuleType("myplugin.sub"))
    _forget_stale_plugin_module("myplugin.py", copy)
    assert "myplugin" not in sys.modules and "myplugin.sub" not in sys.modules
    current = types.ModuleType("myplugin")
    current.__file__ = str(copy)
    monkeypatch.setitem(sys.modules, "myplugin", current)
    _forget_stale_plugin_module("myplugin.py", copy)  # this sweep's: kept
    assert sys.modules["myplugin"] is current
