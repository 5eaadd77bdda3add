"""The Priority admission plugin the simulator runs on its inputs (plugin/pkg/admission/priority)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.admission import AdmissionError, admit_priority, carried_priority_note
from kubesched.simulate.inputs.dump import ClusterInputError, load_cluster

HIGH = {"metadata": {"name": "high"}, "value": 5000}
NEVER = {"metadata": {"name": "batch"}, "value": 10, "preemptionPolicy": "Never"}
DEFAULT = {"metadata": {"name": "dflt"}, "value": 7, "globalDefault": True}
CLASSES = {"high": HIGH, "batch": NEVER}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_class_value_and_policy_are_copied() -> None:
    p = pod(priorityClassName="batch")
    admit_priority(p, CLASSES)
    assert (p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (10, "Never")


def test_builtin_system_classes_exist_without_objects() -> None:
    p = pod(priorityClassName="system-node-critical")
    admit_priority(p, {})
    assert p["spec"]["priority"] == 2000001000


def test_global_default_names_the_class_lowest_value_wins() -> None:
    p = pod()
    admit_priority(p, {**CLASSES, "dflt": DEFAULT, "other": {**DEFAULT, "value": 99}})
    assert (p["spec"]["priorityClassName"], p["spec"]["priority"]) == ("dflt", 7)


def test_no_class_no_default_is_zero_and_keeps_what_the_input_says() -> None:
    p = pod()
    admit_priority(p, CLASSES)
    assert (p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    q = pod(priority=300, preemptionPolicy="Never")
    admit_priority(q, CLASSES)
    assert (q["spec"]["priority"], q["spec"]["preemptionPolicy"]) == (300, "Never")


def test_unknown_class_is_refused_as_the_apiserver_does() -> None:
    with pytest.raises(AdmissionError, match="no PriorityClass with name missing was found"):
        admit_priority(pod(priorityClassName="missing"), CLASSES)


def test_policy_that_disagrees_with_its_class_is_refused() -> None:
    with pytest.raises(AdmissionError, match=r"PreemptionPolicy \(PreemptLowerPriority\) must not be provided"):
        admit_priority(pod(priorityClassName="batch", preemptionPolicy="PreemptLowerPriority"), CLASSES)


def test_a_pod_that_carries_a_priority_keeps_it_whatever_its_class_says() -> None:
    # Admitted when it was created (a dump of a real cluster): the apiserver does not run again.
    for classes in (CLASSES, {}):
        p = pod(priorityClassName="high", priority=3)
        admit_priority(p, classes)
        assert (p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (3, "PreemptLowerPriority")
    q = pod(priorityClassName="batch", priority=10)
    admit_priority(q, CLASSES)
    assert q["spec"]["preemptionPolicy"] == "Never"  # the only field filled: from the class
    assert carried_priority_note(pod(priorityClassName="high", priority=3)["spec"], CLASSES) == (
        "spec.priority 3 is not PriorityClass high's value 5000"
    )
    assert carried_priority_note(pod(priorityClassName="gold", priority=3)["spec"], CLASSES) == (
        "spec.priorityClassName: no PriorityClass with name gold in the input"
    )
    assert carried_priority_note(pod(priorityClassName="high", priority=5000)["spec"], CLASSES) is None
    assert carried_priority_note(pod(priorityClassName="system-node-critical", priority=1)["spec"], {}) is None


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> Path:
    f = tmp_path / "cluster.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    return f


def test_simulator_inputs_are_admitted_whatever_the_plugins_declare(tmp_path: Path) -> None:
    # A hand-written what-if input: the class exists only as an object of the input, and no
    # plugin is asked to read PriorityClasses (kinds=()): the pod still gets its priority, so the
    # queue order and preemption see the same number.
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **HIGH}
    p = {"apiVersion": "v1", "kind": "Pod", **pod(priorityClassName="high")}
    cluster = load_cluster(_write(tmp_path, [pc, p]))
    assert cluster.pods[0]["spec"]["priority"] == 5000
    assert "high" in cluster.objects["PriorityClass"]


def test_simulator_input_naming_a_missing_class_names_file_pod_and_field(tmp_path: Path) -> None:
    p = {"apiVersion": "v1", "kind": "Pod", **pod(priorityClassName="gold")}
    with pytest.raises(ClusterInputError) as e:
        load_cluster(_write(tmp_path, [p]))
    msg = str(e.value)
    assert "cluster.yaml: document 1 (Pod default/p)" in msg
    assert "spec.priorityClassName: no PriorityClass with name gold was found" in msg


def test_priority_class_with_a_bad_value_is_a_clear_error(tmp_path: Path) -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": "high"}
    with pytest.raises(ClusterInputError, match=r"\(PriorityClass x\): value must be an integer, got 'high'"):
        load_cluster(_write(tmp_path, [pc]))


def _dump_pod(name: str, cls: str, priority: int) -> dict[str, Any]:
    p = pod(priorityClassName=cls, priority=priority, preemptionPolicy="PreemptLowerPriority")
    p["metadata"]["name"] = name
    return {"apiVersion": "v1", "kind": "Pod", **p}


def test_a_dump_without_priority_classes_is_taken_as_it_is_with_one_warning(tmp_path: Path) -> None:
    # kubectl get nodes,pods -A -o yaml: the pods carry spec.priority, no PriorityClass is listed.
    cluster = load_cluster(_write(tmp_path, [_dump_pod("a", "low", 100), _dump_pod("b", "low", 100),
                                             _dump_pod("c", "system-node-critical", 2000001000)]))
    assert [p["spec"]["priority"] for p in cluster.pods] == [100, 100, 2000001000]
    assert cluster.warnings == ["no PriorityClasses in the input: priorities taken from the pods"]


def test_a_class_missing_from_a_dump_that_has_others_is_a_warning_naming_the_pod(tmp_path: Path) -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **HIGH}
    cluster = load_cluster(_write(tmp_path, [pc, _dump_pod("a", "low", 100), _dump_pod("b", "low", 100),
                                             _dump_pod("c", "high", 7)]))
    assert [p["spec"]["priority"] for p in cluster.pods] == [100, 100, 7]
    path = tmp_path / "cluster.yaml"
    assert cluster.warnings == [
        f"{path}: document 2 (Pod default/a): spec.priorityClassName: no PriorityClass with name low in the input: "
        "the priority the pod carries is kept (so for 1 more pod)",
        f"{path}: document 4 (Pod default/c): spec.priority 7 is not PriorityClass high's value 5000: "
        "the priority the pod carries is kept",
    ]
