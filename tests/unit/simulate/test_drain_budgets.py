"""Drain what-if with PodDisruptionBudgets (simulate/whatif/drain_budget.py, drain.py): the budget
arithmetic of the disruption controller, the eviction API's rules in kubectl's order, and the
answer an SRE needs — would the drain complete, and if not, which pod, which budget, why — in the
terminal, the JSON and the report. Every expected figure is worked out by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched import testing as builders
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.whatif.drain import plan_drain
from kubesched.simulate.whatif.drain_budget import MORE_THAN_ONE, VIOLATES, load_budgets
from unit.simulate.test_cli_simulate import ok, run_cli
from unit.simulate.test_drain import owned


def pdb(name: str, selector: dict[str, Any] | None, namespace: str = "default", status: dict[str, Any] | None = None,
        generation: int | None = None, **spec: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": name, "namespace": namespace},
                           "spec": {**({"selector": selector} if selector is not None else {}), **spec}}
    if status is not None:
        raw["status"] = status
    if generation is not None:
        raw["metadata"]["generation"] = generation
    return raw


def app(name: str, label: str, node: str = "", cpu: str = "100m", namespace: str = "default",
        ready: bool = True, **labels: str) -> dict[str, Any]:
    raw = owned(builders.pod(name, cpu=cpu, node_name=node, namespace=namespace, labels={"app": label, **labels}),
                "ReplicaSet")
    if not ready:
        raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    return raw


def cluster(pods: list[dict[str, Any]], pdbs: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None
            ) -> ClusterInput:
    nodes = nodes or [builders.node(n, cpu="8", memory="16Gi") for n in ("old-1", "new-1")]
    objects = {"PodDisruptionBudget": {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pdbs}}
    return ClusterInput(nodes=nodes, pods=pods, objects=objects, skipped={}, source="test")


# -- the disruption controller's arithmetic ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "desired", "allowed"),
    [
        # 4 pods match, 3 of them Ready: expected 4, healthy 3; allowed = max(0, healthy - desired).
        ({"minAvailable": 2}, 2, 1),
        ({"minAvailable": 3}, 3, 0),
        ({"minAvailable": "50%"}, 2, 1),  # ceil(0.5 × 4) = 2
        ({"minAvailable": "60%"}, 3, 0),  # ceil(2.4) = 3
        ({"maxUnavailable": 1}, 3, 0),  # 4 - 1
        ({"maxUnavailable": "30%"}, 2, 1),  # 4 - ceil(1.2)
        ({"maxUnavailable": "20%"}, 3, 0),  # 4 - ceil(0.8)
        ({}, 0, 3),  # neither: nothing is required
    ],
)
def test_budget_from_the_spec_as_the_disruption_controller_computes_it(spec: dict[str, Any], desired: int,
                                                                        allowed: int) -> None:
    pods = [app(f"a-{i}", "a", "new-1") for i in range(3)] + [app("a-3", "a", "new-1", ready=False),
                                                             app("b-0", "b", "new-1")]
    (b,) = load_budgets({"PodDisruptionBudget": {"default/a": pdb("a", {"matchLabels": {"app": "a"}}, **spec)}},
                        pods)
    assert (b.expected, b.healthy, b.desired, b.allowed, b.source) == (4, 3, desired, allowed, "spec")


def test_status_is_read_as_the_eviction_api_reads_it_unless_the_controller_is_behind() -> None:
    pods = [app("a-0", "a", "new-1")]
    status = {"disruptionsAllowed": 0, "currentHealthy": 5, "desiredHealthy": 4, "expectedPods": 5,
              "observedGeneration": 1}
    objects = {"PodDisruptionBudget": {
        "default/read": pdb("read", {"matchLabels": {"app": "a"}}, status=status, generation=1, minAvailable=0),
        # observedGeneration 1 < generation 2: computed from the spec (1 healthy - 0 desired = 1).
        "default/behind": pdb("behind", {"matchLabels": {"app": "a"}}, status=status, generation=2, minAvailable=0),
    }}
    read, behind = load_budgets(objects, pods)
    assert (read.source, read.allowed, read.healthy, read.desired) == ("status", 0, 5, 4)
    assert (behind.source, behind.allowed) == ("spec", 1)


# -- the eviction API, in kubectl's order -----------------------------------------------------------------


def test_eviction_rules_in_kubectl_order() -> None:
    pods = [
        # a: minAvailable 1 over 4 ready pods → 3 allowed; kubectl tries a-1, a-2, a-3 (name order).
        app("a-3", "a", "old-1"), app("a-1", "a", "old-1"), app("a-2", "a", "old-1"), app("a-9", "a", "new-1"),
        # b: maxUnavailable 0 → 0 allowed before the drain: blocked for good (a 429, retried forever).
        app("b-1", "b", "old-1"), app("b-2", "b", "new-1"),
        # c: two budgets select it → the eviction API refuses it (not a 429: kubectl fails the node).
        app("c-1", "c", "old-1", tier="x"),
        # d: minAvailable 2, 2 of 3 ready → 0 allowed; d-1 is unready and healthy >= desired > 0:
        # evicted without using the budget.
        app("d-1", "d", "old-1", ready=False), app("d-2", "d", "new-1"), app("d-3", "d", "new-1"),
        # e: a budget of another namespace selects nothing here.
        app("e-1", "e", "old-1", namespace="other"),
        # h: an empty selector selects every pod of its namespace; 1 pod, minAvailable 1 → 0 allowed.
        app("h-1", "h", "old-1", namespace="ns-h"),
        # g: a missing selector selects nothing.
        app("g-1", "g", "old-1"),
    ]
    pdbs = [
        pdb("a", {"matchLabels": {"app": "a"}}, minAvailable=1),
        pdb("b", {"matchLabels": {"app": "b"}}, maxUnavailable=0),
        pdb("c1", {"matchLabels": {"app": "c"}}, minAvailable=0),
        pdb("c2", {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, minAvailable=0),
        pdb("d", {"matchLabels": {"app": "d"}}, minAvailable=2),
        pdb("e", {"matchLabels": {"app": "e"}}, minAvailable=5),
        pdb("h", {}, namespace="ns-h", minAvailable=1),
        pdb("g", None, minAvailable=5),
    ]
    _, plan = plan_drain(cluster(pods, pdbs), ["old-1"])
    assert plan.order["old-1"] == ["default/a-1", "default/a-2", "default/a-3", "default/b-1", "default/c-1",
                                   "default/d-1", "default/g-1", "ns-h/h-1", "other/e-1"]
    assert {k: c.disruptions_allowed for k, c in plan.covered.items() if c.budget == "default/a"} == {
        "default/a-1": 3, "default/a-2": 2, "default/a-3": 1}
    assert set(plan.blocked) == {"default/b-1", "default/c-1", "ns-h/h-1"}
    b1 = plan.blocked["default/b-1"]
    assert (b1.budget, b1.disruptions_allowed, b1.retried) == ("default/b", 0, True)
    assert b1.message == f"{VIOLATES} The disruption budget b needs 2 healthy pods and has 2 currently"
    c1 = plan.blocked["default/c-1"]
    assert c1.message.startswith(MORE_THAN_ONE) and not c1.retried
    assert plan.blocked["ns-h/h-1"].message.endswith("needs 1 healthy pods and has 1 currently")
    assert plan.covered["default/d-1"].unhealthy
    assert set(plan.evicted) == {"default/a-1", "default/a-2", "default/a-3", "default/d-1", "other/e-1",
                                 "default/g-1"}
    assert not plan.waiting


# -- the command: would the drain complete? ---------------------------------------------------------------


def write(tmp_path: Path, c: ClusterInput) -> Path:
    path = tmp_path / "cluster.yaml"
    items = c.nodes + c.pods + [p for by_key in c.objects.values() for p in by_key.values()]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def web_cluster(room_on_new: str) -> ClusterInput:
    """old-1 and old-2 run web pods (1 cpu each); new-1 runs one and has ``room_on_new`` cpu
    beyond it. Budget web: minAvailable 3 of 4 ready pods → 1 disruption allowed."""
    nodes = [builders.node("old-1", cpu="4", memory="8Gi"), builders.node("old-2", cpu="4", memory="8Gi"),
             builders.node("new-1", cpu=str(1 + int(room_on_new)), memory="8Gi")]
    pods = [app("web-a", "web", "old-1", cpu="1"), app("web-b", "web", "old-1", cpu="1"),
            app("web-c", "web", "old-2", cpu="1"), app("web-d", "web", "new-1", cpu="1")]
    return cluster(pods, [pdb("web", {"matchLabels": {"app": "web"}}, minAvailable=3)], nodes)


def test_a_budget_the_drain_uses_up_comes_back_when_replacements_are_ready(tmp_path: Path) -> None:
    # new-1 has room for 2 more: web-a is evicted at once (1 allowed), its replacement fits and
    # gives the unit back, so web-b is evicted after waiting, and fits too.
    path = write(tmp_path, web_cluster("2"))
    drain = json.loads(ok(run_cli("--cluster", path, "--drain", "old-1", "--output", "json")).stdout)["drain"]
    pods = {p["pod"]: p for p in drain["pods"]}
    assert (pods["default/web-a"]["eviction"], pods["default/web-a"]["disruptionsAllowed"]) == ("immediate", 1)
    assert (pods["default/web-b"]["eviction"], pods["default/web-b"]["disruptionsAllowed"]) == ("afterWait", 0)
    assert all(p["status"] == "Scheduled" and p["node"] != "old-1" for p in pods.values())
    assert drain["complete"] and not drain["blocked"]
    assert drain["verdict"] == "kubectl drain would complete: every evicted pod fits elsewhere"
    assert drain["budgets"] == [{"pdb": "default/web", "rule": "minAvailable: 3", "source": "spec",
                                 "expectedPods": 4, "desiredHealthy": 3, "currentHealthy": 4,
                                 "disruptionsAllowed": 1, "evicted": 2, "blocked": 0}]


def test_a_replacement_that_fits_nowhere_holds_the_budget_and_the_drain_never_completes(tmp_path: Path) -> None:
    # new-1 is full and old-2 is cordoned too: web-a is evicted (1 allowed) but its replacement fits
    # nowhere, so the budget never comes back: web-b is blocked, kubectl retries it forever on old-1
    # and never gets to old-2 (web-c stays).
    path = write(tmp_path, web_cluster("0"))
    args = ("--cluster", path, "--drain", "old-1,old-2")
    drain = json.loads(ok(run_cli(*args, "--output", "json")).stdout)["drain"]
    assert [p["pod"] for p in drain["pods"]] == ["default/web-a"]
    assert drain["pods"][0]["status"] == "Unschedulable"
    assert [(b["pod"], b["from"], b["pdb"], b["disruptionsAllowed"]) for b in drain["blocked"]] == [
        ("default/web-b", "old-1", "default/web", 0), ("default/web-c", "old-2", "default/web", 0)]
    assert drain["blocked"][0]["message"] == (
        f"{VIOLATES} The disruption budget web needs 3 healthy pods and has 3 currently")
    assert not drain["complete"]
    assert drain["verdict"].startswith("kubectl drain would not complete: 2 pod(s) cannot be evicted (default/web); "
                                       "first default/web-b on old-1")
    assert drain["verdict"].endswith("kubectl retries it forever and never drains old-2")
    assert [(n["node"], n["drained"], n["reached"], n["waitsForever"]) for n in drain["perNode"]] == [
        ("old-1", False, True, True), ("old-2", False, False, False)]
    assert drain["perNode"][0]["order"] == ["default/web-a", "default/web-b"]

    text = ok(run_cli(*args)).stdout
    assert "kubectl drain would not complete" in text and "retries it forever" in text
    assert "Pods a PodDisruptionBudget keeps on their node: 2" in text and "default/web" in text
    assert "waits here forever" in text and "not reached" in text

    report = tmp_path / "r.html"
    ok(run_cli(*args, "--report", report))
    html = report.read_text()
    assert 'id="drain-blocked"' in html and "would not complete" in html and "needs 3 healthy pods" in html


def test_budgets_are_read_whatever_the_configuration(tmp_path: Path) -> None:
    # A profile without any plugin that declares PodDisruptionBudgets still gets them for --drain.
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler",
                      "plugins": {"multiPoint": {"disabled": [{"name": "DefaultPreemption"}]}}}],
    }))
    path = write(tmp_path, web_cluster("0"))
    drain = json.loads(ok(run_cli("--cluster", path, "--config", config, "--drain", "old-1,old-2",
                                  "--output", "json")).stdout)["drain"]
    assert [b["pod"] for b in drain["blocked"]] == ["default/web-b", "default/web-c"]


def test_a_bad_budget_is_one_clear_line(tmp_path: Path) -> None:
    c = web_cluster("2")
    c.objects["PodDisruptionBudget"]["default/web"]["spec"]["minAvailable"] = "half"
    result = run_cli("--cluster", write(tmp_path, c), "--drain", "old-1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "PodDisruptionBudget default/web" in result.output and "spec.minAvailable" in result.output
