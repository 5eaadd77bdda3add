"""Property: a ``--cluster`` dump or a configuration file mutated one field at a time (wrong types,
removed fields, huge or deeply nested values, broken YAML/JSON) is either accepted or refused with
one clear error naming the file (and the object and field where there is one), never a traceback.

``KUBESCHED_FUZZ_EXAMPLES`` scales the number of examples (``python -m bench fuzz`` raises it).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubesched.app.startup import UserError, load_scheduler_config
from kubesched.cli import main
from kubesched.simulate.inputs.dump import ClusterInputError, load_cluster
from kubesched.testing import node, pod
from unit.fuzz_mutation import field_paths, mutate

EXAMPLES = int(os.environ.get("KUBESCHED_FUZZ_EXAMPLES", "400")) // 2

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | finite_floats | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=6), inner, max_size=3), max_leaves=8)
replacement = values | st.sampled_from(["DELETE", "x" * 50_000, -1, "1Gi", "100m", "-5", "1e400", [], {},
                                        {"a": {"b": {"c": [[[[1]]]]}}}])

bound = pod("bound", cpu="500m", memory="1Gi", labels={"app": "a"})
bound["spec"]["nodeName"] = "n1"
pending = pod("pending", cpu="1", memory="512Mi", labels={"app": "b"})
pending["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
pending["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}
n1 = node("n1", cpu="4", memory="8Gi", labels={"zone": "z1"})
n1["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
VALID_DUMP: dict[str, Any] = {"apiVersion": "v1", "kind": "List",
                              "items": [n1, node("n2", cpu="2", memory="4Gi"), bound, pending]}
VALID_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "percentageOfNodesToScore": 50,
    "leaderElection": {"leaderElect": True, "leaseDuration": "15s"},
    "clientConnection": {"qps": 50, "burst": 100},
    "profiles": [{
        "schedulerName": "custom",
        "plugins": {"score": {"enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 2}],
                              "disabled": [{"name": "ImageLocality"}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}}],
    }],
}


@st.composite
def mutated_file(draw: st.DrawFn, valid: dict[str, Any]) -> tuple[str, bytes]:
    """(suffix, content): ``valid`` with up to three fields changed or removed, as JSON or YAML, or
    the text itself broken (truncated, a bad byte)."""
    doc = copy.deepcopy(valid)
    mutate(draw, doc, field_paths(valid), replacement)
    fmt = draw(st.sampled_from(["json", "yaml", "yaml", "truncated", "badbyte"]))
    if fmt == "json":
        return ".json", json.dumps(doc).encode()
    text = yaml.safe_dump(doc).encode()
    if fmt == "truncated":
        return ".yaml", text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if fmt == "badbyte":
        i = draw(st.integers(0, len(text)))
        bad = draw(st.sampled_from([b"\xff", b"\t", b": :", b"{", b"&a *b", b"!!python/object:x"]))
        return ".yaml", text[:i] + bad + text[i:]
    return ".yaml", text


FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                phases=(Phase.generate, Phase.shrink),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@FUZZ
@given(case=mutated_file(VALID_DUMP))
def test_mutated_cluster_dumps_load_or_name_the_file(tmp_path: Path, case: tuple[str, bytes]) -> None:
    suffix, content = case
    f = tmp_path / f"dump{suffix}"
    f.write_bytes(content)
    try:
        load_cluster(f)
    except ClusterInputError as e:
        assert str(e).startswith(str(f)), str(e)
        assert "\n" not in str(e).strip() or "Traceback" not in str(e)


@FUZZ
@given(case=mutated_file(VALID_CONFIG))
def test_mutated_configuration_files_load_or_name_the_file(tmp_path: Path, case: tuple[str, bytes]) -> None:
    suffix, content = case
    f = tmp_path / f"config{suffix}"
    f.write_bytes(content)
    try:
        load_scheduler_config(f)
    except UserError as e:
        assert str(f) in e.message, e.message


@pytest.mark.parametrize("what", ["cluster", "config"])
@settings(max_examples=max(10, EXAMPLES // 10), deadline=None, database=None, derandomize=True,
          phases=(Phase.generate,), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                           HealthCheck.function_scoped_fixture])
@given(dump=mutated_file(VALID_DUMP), config=mutated_file(VALID_CONFIG))
def test_simulate_with_mutated_inputs_never_shows_a_traceback(
    tmp_path: Path, what: str, dump: tuple[str, bytes], config: tuple[str, bytes]
) -> None:
    """End to end, as a user runs it: ``kubesched simulate --cluster F [--config C]``."""
    cluster_file = tmp_path / f"dump{dump[0]}"
    cluster_file.write_bytes(dump[1] if what == "cluster" else orjson.dumps(VALID_DUMP))
    args = ["simulate", "-q", "--cluster", str(cluster_file)]
    if what == "config":
        config_file = tmp_path / f"config{config[0]}"
        config_file.write_bytes(config[1])
        args += ["--config", str(config_file)]
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (out, result.exception)
    assert "Traceback" not in out, out
    if result.exit_code == 2:
        named = cluster_file if what == "cluster" else tmp_path / f"config{config[0]}"
        assert str(named) in out, out


def test_the_valid_inputs_load(tmp_path: Path) -> None:
    """The seeds of the mutations are valid themselves (else every mutation tests a refusal)."""
    (tmp_path / "d.json").write_bytes(orjson.dumps(VALID_DUMP))
    (tmp_path / "c.json").write_bytes(orjson.dumps(VALID_CONFIG))
    result = CliRunner().invoke(main, ["simulate", "-q", "--cluster", str(tmp_path / "d.json"),
                                       "--config", str(tmp_path / "c.json")])
    assert result.exit_code in (0, 1), result.output
    assert len(load_cluster(tmp_path / "d.json").pods) == 2
