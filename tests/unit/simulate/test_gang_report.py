"""What a user sees about the Workload API's gangs (scheduling.k8s.io PodGroups, GangScheduling
with the GenericWorkload gate) in ``kubesched simulate``: each group's state and why it waits in
the JSON document and the summary, and ``--explain`` on a waiting member naming its group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.testing import node, pod

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "featureGates": {"GenericWorkload": True},
}


def pod_group(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def members(group: str, n: int, cpu: str) -> list[dict[str, Any]]:
    return [pod(f"{group}-{i}", cpu=cpu, schedulingGroup={"podGroupName": group}) for i in range(n)]


def simulate(tmp_path: Path, *args: str) -> str:
    # One 4-CPU node: "small" (2 members of 1 CPU) fits; "big" (3 of 2 CPU) never does (its cycle
    # places 1, the next fails: 1 scheduled, 1 remaining); and
    # "short" has 2 of its 5 members: it is held before any node is tried.
    items = [node("n0", cpu="4"), pod_group("big", 3), pod_group("small", 2), pod_group("short", 5)]
    items += members("big", 3, "2") + members("small", 2, "1") + members("short", 2, "100m")
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--config", str(config), *args],
                                catch_exceptions=False, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_reports_each_workload_pod_group_and_why_it_waits(tmp_path: Path) -> None:
    groups = orjson.loads(simulate(tmp_path, "-o", "json"))["workloadPodGroups"]
    assert groups["default/small"] == {
        "policy": "gang", "minCount": 2, "members": 2, "placed": 2, "waiting": 0, "pending": 0,
        # The condition the PodGroup cycle writes, as a live cluster's PodGroup would carry it.
        "condition": {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""},
    }
    big = groups["default/big"]
    assert (big["minCount"], big["members"], big["placed"]) == (3, 3, 0)
    # The message of the group's PodGroup cycle, as its members got it.
    assert big["reason"] == (
        "waiting for PodGroup default/big: minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
    assert big["condition"]["status"] == "False" and big["condition"]["reason"] == "Unschedulable"
    assert big["condition"]["message"].startswith("minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
    short = groups["default/short"]
    assert (short["members"], short["placed"], short["pending"]) == (2, 0, 2)
    assert short["reason"] == "waiting for PodGroup default/short: minCount 5, 2 members exist"
    assert "condition" not in short  # held at PreEnqueue: no cycle has run for it


def test_summary_lists_the_waiting_gangs_first_with_their_reason(tmp_path: Path) -> None:
    out = simulate(tmp_path)
    assert "PodGroups, 3 of 3" in out
    lines = [line for line in out.splitlines() if "default/" in line and "scheduling.k8s.io" in line]
    assert [line.split()[1] for line in lines] == ["default/big", "default/short", "default/small"]
    assert "0/3 placed, 3 members" in lines[0] and "cannot be satisfied" in lines[0]
    assert "minCount 5, 2 members exist" in lines[1]
    assert "2/2 placed, 2 members" in lines[2]


def test_explain_a_member_held_for_its_gang_names_the_group(tmp_path: Path) -> None:
    out = simulate(tmp_path, "--explain", "short-0")
    # The member fits the node, yet it waits: explain says for which group and why.
    assert "GangScheduling: waiting for PodGroup default/short: minCount 5, 2 members exist" in out
    out = simulate(tmp_path, "--explain", "big-0")
    assert "GangScheduling: waiting for PodGroup default/big: minCount (3) cannot be satisfied" in out


def test_explain_a_placed_gang_member_says_nothing_about_waiting(tmp_path: Path) -> None:
    assert "GangScheduling:" not in simulate(tmp_path, "--explain", "small-0")


class FakeApi:
    """The few GETs ``kubesched explain`` makes (one pod, then the lists), from fixed items."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        if "/namespaces/default/pods/" in path:
            name = path.rsplit("/", 1)[1]
            return next(i for i in self.items if i["kind"] == "Pod" and i["metadata"]["name"] == name)
        kind = {"/api/v1/nodes": "Node", "/api/v1/pods": "Pod",
                "/apis/scheduling.k8s.io/v1beta1/podgroups": "PodGroup"}.get(path)
        return {"items": [i for i in self.items if i["kind"] == kind]}


def test_live_explain_counts_the_pending_members_of_the_gang() -> None:
    """On a live cluster the members not yet placed are listed too: the count is the group's."""
    import asyncio

    from kubesched.config.load import load_config
    from kubesched.live.explain import explain_live
    from kubesched.plugins.builtin import builtin_registry

    items = [node("n0", cpu="4"), pod_group("short", 5), *members("short", 3, "100m")]
    registry = builtin_registry()
    config = load_config(CONFIG, registry)
    live = asyncio.run(explain_live(FakeApi(items), config, registry, "short-0", "default"))  # type: ignore[arg-type]
    assert live.explanation.waiting == {
        "GangScheduling": "waiting for PodGroup default/short: minCount 5, 3 members exist"}


def test_explain_a_coscheduling_member_short_of_siblings_names_its_group(tmp_path: Path) -> None:
    """The same line for scheduler-plugins' gangs (pods join by label, minMember)."""
    from kubesched.plugins.coscheduling import POD_GROUP_LABEL
    from unit.plugins.gang_helpers import coscheduling_config
    from unit.plugins.gang_helpers import pod_group as x_pod_group

    items = [node("n0", cpu="4"), x_pod_group("g", 3)]
    items += [pod(f"g-{i}", cpu="1", labels={POD_GROUP_LABEL: "g"}) for i in range(2)]
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text(coscheduling_config())
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--config", str(config),
                                       "--explain", "g-0"], catch_exceptions=False, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "Coscheduling: waiting for PodGroup default/g: minCount 3, 2 members exist" in result.stdout


def _gang_table(html: str) -> list[list[str]]:
    import re
    from html import unescape

    section = re.search(r'<section id="gangs">.*?</section>', html, re.S)
    assert section is not None, "no gangs section in the report"
    rows = re.findall(r"<tr class=\"(?:waiting|placed)\">(.*?)</tr>", section.group(0), re.S)
    return [[unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", r)] for r in rows]


def test_html_report_shows_each_gang_as_the_summary_and_json_do(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    doc = orjson.loads(simulate(tmp_path, "-o", "json", "--report", str(report)))
    html = report.read_text()
    assert "3 PodGroups at the end of the run, 2 waiting" in html
    rows = _gang_table(html)
    # The waiting first, as in the terminal table; each state and reason as in the JSON.
    assert [r[0] for r in rows] == ["default/big", "default/short", "default/small"]
    assert rows[0][1:5] == ["PodGroup", "scheduling.k8s.io", "gang", "0/3 placed, 3 members, 3 pending"]
    assert rows[0][5] == doc["workloadPodGroups"]["default/big"]["reason"]
    assert rows[1][4:] == ["0/5 placed, 2 members, 2 pending",
                           "waiting for PodGroup default/short: minCount 5, 2 members exist"]
    assert rows[2][4:] == ["2/2 placed, 2 members", ""]


def test_html_report_without_gangs_has_no_gang_section() -> None:
    from kubesched.simulate.report.html import render_html

    assert 'id="gangs"' not in render_html({})


def test_html_report_escapes_gang_names_and_reasons() -> None:
    from kubesched.simulate.report.html import render_html

    evil = "<script>alert(1)</script>"
    html = render_html({"workloadPodGroups": {f"default/{evil}": {
        "policy": "gang", "minCount": 2, "members": 1, "placed": 0, "waiting": 0, "pending": 1, "reason": evil}}})
    assert evil not in html and "&lt;script&gt;" in html


def test_gang_section_renders_in_headless_chromium(tmp_path: Path) -> None:
    from unit.simulate.test_compare import _render
    from unit.simulate.test_report_html import _chromium_or_skip

    chromium = _chromium_or_skip()
    page = tmp_path / "report.html"
    simulate(tmp_path, "--report", str(page))
    dom = _render(chromium, page, tmp_path / "report.png")
    # The browser parsed the table: the three groups, the waiting first, each with its state.
    assert _gang_table(dom)[0][:5] == ["default/big", "PodGroup", "scheduling.k8s.io", "gang",
                                      "0/3 placed, 3 members, 3 pending"]
    assert [r[0] for r in _gang_table(dom)] == ["default/big", "default/short", "default/small"]


COMPOSITE_CONFIG = {**CONFIG, "featureGates": {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True,
                                               "CompositePodGroup": True}}


def composite(name: str, min_group_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"cpg-{name}"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": min_group_count}}}}


def child(name: str, min_count: int, parent: str) -> dict[str, Any]:
    pg = pod_group(name, min_count)
    pg["spec"]["parentCompositePodGroupName"] = parent
    return pg


def simulate_composites(tmp_path: Path, *args: str) -> str:
    # One 4-CPU node. "job" (minGroupCount 2): gangs a (2 × 1 CPU) and b (2 × 2 CPU), 6 CPU in all:
    # its cycle places a, then b does not fit: nothing binds. "wait" (minGroupCount 2): gang c has 1
    # of its 2 members, so the tree is held at PreEnqueue.
    items = [node("n0", cpu="4"), composite("job", 2), child("a", 2, "job"), child("b", 2, "job"),
             composite("wait", 2), child("c", 2, "wait"), child("d", 1, "wait")]
    items += members("a", 2, "1") + members("b", 2, "2") + members("c", 1, "100m") + members("d", 1, "100m")
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(COMPOSITE_CONFIG))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--config", str(config), *args],
                                catch_exceptions=False, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_each_composite_pod_group_is_reported_with_its_children_and_why_it_waits(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    doc = orjson.loads(simulate_composites(tmp_path, "-o", "json", "--report", str(report)))
    composites = doc["workloadCompositePodGroups"]
    print(orjson.dumps(composites, option=orjson.OPT_INDENT_2).decode())
    assert composites["default/job"] == {
        "policy": "gang", "minGroupCount": 2, "children": 2, "childrenReady": 2, "childrenPlaced": 0,
        "members": 4, "placed": 0,
        "reason": "waiting for CompositePodGroup default/job: minCount (2) cannot be satisfied: 1 scheduled, "
                  "0 remaining"}
    assert composites["default/wait"] == {
        "policy": "gang", "minGroupCount": 2, "children": 2, "childrenReady": 1, "childrenPlaced": 0,
        "members": 2, "placed": 0,
        "reason": 'waiting for CompositePodGroup default/wait: waiting for composite pod group "wait" tree to '
                  "meet quorum"}
    rows = {(r[0], r[1]): r for r in _gang_table(report.read_text())}
    assert rows[("default/job", "CompositePodGroup")][2:] == [
        "scheduling.k8s.io", "gang", "0/2 children placed, 2 children, 4 members", composites["default/job"]["reason"]]
    assert rows[("default/wait", "CompositePodGroup")][4] == (
        "0/2 children placed, 2 children, 2 members, 1 children ready")
    assert "4 PodGroups and 2 CompositePodGroups at the end of the run, 6 waiting" in report.read_text()
    # The terminal table lists them with the PodGroups.
    out = simulate_composites(tmp_path)
    assert "CompositePodGroup" in out and "0/2 children placed" in out


def test_explain_a_member_under_composites_shows_each_one_above_it(tmp_path: Path) -> None:
    """``root`` (minGroupCount 1) over ``mid`` (minGroupCount 2) over gangs x (1 of its 2 members)
    and y (complete): explain names x's own wait, then mid and root, nearest first."""
    mid = composite("mid", 2)
    mid["spec"]["parentCompositePodGroupName"] = "root"
    items = [node("n0", cpu="4"), composite("root", 1), mid, child("x", 2, "mid"), child("y", 1, "mid")]
    items += members("x", 1, "100m") + members("y", 1, "100m")
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(COMPOSITE_CONFIG))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--config", str(config),
                                       "--explain", "x-0", "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["workloadCompositePodGroups"]["default/mid"]["parent"] == "root"
    out = CliRunner().invoke(main, ["simulate", "--cluster", str(cluster), "--config", str(config),
                                    "--explain", "x-0"], catch_exceptions=False, env={"COLUMNS": "250"}).stdout
    lines = [line.strip() for line in out.splitlines()]
    start = lines.index("GangScheduling: waiting for PodGroup default/x: minCount 2, 1 members exist")
    assert lines[start + 1:start + 3] == [
        "CompositePodGroup default/mid: 0/2 children placed, 1/2 ready, 2 members",
        "CompositePodGroup default/root: 0/1 children placed, 0/1 ready, 2 members",
    ]
