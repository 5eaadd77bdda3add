"""PodInfo.from_raw with the previous version of the pod: status updates are not parsed again."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.snapshot.pod import PodInfo, PodSpecError, raw_pod_uid
from kubesched.testing import pod


def test_a_status_update_keeps_the_parsed_fields_and_carries_the_new_object() -> None:
    raw = pod("web", cpu="500m", memory="1Gi", node_name="n1", labels={"app": "web"})
    first = PodInfo.from_raw(raw)
    running = copy.deepcopy(raw)
    running["status"] = {"phase": "Running"}
    running["metadata"]["resourceVersion"] = "7"
    again = PodInfo.from_raw(running, first)
    assert again.raw is running and again.phase == "Running"
    assert again.requests is first.requests and again.labels is first.labels  # not parsed again
    assert (again.uid, again.node_name, again.requests.milli_cpu) == (first.uid, "n1", 500)


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda r: r["spec"]["containers"][0]["resources"]["requests"].update(cpu="2"), ("requests.milli_cpu", 2000)),
        (lambda r: r["metadata"]["labels"].update(app="api"), ("labels", {"app": "api"})),
        (lambda r: r["spec"].update(nodeName="n2"), ("node_name", "n2")),
    ],
    ids=["requests", "labels", "node"],
)
def test_a_change_to_what_is_parsed_parses_again(
    change: Callable[[dict[str, Any]], None], expect: tuple[str, Any]
) -> None:
    raw = pod("web", cpu="500m", node_name="n1", labels={"app": "web"})
    first = PodInfo.from_raw(raw)
    changed = copy.deepcopy(raw)
    change(changed)
    again = PodInfo.from_raw(changed, first)
    field, value = expect
    got: Any = again
    for part in field.split("."):
        got = getattr(got, part)
    assert got == value


def test_a_broken_update_is_still_reported() -> None:
    raw = pod("web", cpu="500m")
    first = PodInfo.from_raw(raw)
    broken = copy.deepcopy(raw)
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(PodSpecError, match=r"requests\.cpu"):
        PodInfo.from_raw(broken, first)


def test_raw_pod_uid_falls_back_to_namespace_and_name() -> None:
    assert raw_pod_uid({"metadata": {"name": "a", "uid": "u1"}}) == "u1"
    assert raw_pod_uid({"metadata": {"name": "a"}}) == "default/a"
    assert raw_pod_uid({"metadata": {"name": "a", "namespace": "x"}}) == PodInfo.from_raw(
        {"metadata": {"name": "a", "namespace": "x"}, "spec": {"containers": []}}
    ).uid


def test_labels_and_node_selector_are_strings_and_not_copied_when_they_already_are() -> None:
    raw = pod("web", labels={"app": "web"})
    raw["spec"]["nodeSelector"] = {"zone": "a"}
    info = PodInfo.from_raw(raw)
    assert info.labels is raw["metadata"]["labels"] and info.node_selector is raw["spec"]["nodeSelector"]
    hand_written = pod("web", labels={"app": "web"})
    hand_written["metadata"]["labels"]["tier"] = 2  # a YAML number, as a hand-written file may hold
    hand_written["spec"]["nodeSelector"] = {"rack": 7}
    parsed = PodInfo.from_raw(hand_written)
    assert parsed.labels == {"app": "web", "tier": "2"} and parsed.node_selector == {"rack": "7"}
