"""Each CompositePodGroup's state for the simulator's report and JSON (``workloadCompositePodGroups``)
and for ``explain``: its children ready and placed against ``minGroupCount``, its members and,
when it is not placed, why it waits — the failure of its last cycle, or its tree short of the
quorum PreEnqueue waits for (the words GangScheduling's PreEnqueue and PlacementFeasible use).

kube-scheduler v1.37.1 writes no status on a CompositePodGroup (GangScheduling README), so this is
what the simulator reports only, drawn from the same counts the plugin decides with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesched.framework.podgroup import PodGroupInfo, parent_composite_name
from kubesched.framework.workload_forest import build_tree
from kubesched.plugins.gangscheduling.podgroup import COMPOSITE_POD_GROUP, POD_GROUP, CompositePodGroup

if TYPE_CHECKING:
    from kubesched.plugins.gangscheduling.plugin import GangScheduling


def composite_reports(gang: GangScheduling) -> dict[str, dict[str, Any]]:
    """CompositePodGroup key → policy, minGroupCount, children (ready: enough members exist;
    placed: enough members bound), members and placed members under it, its parent, and ``reason``
    while fewer than ``minGroupCount`` children are placed."""
    composites = gang.handle.objects(COMPOSITE_POD_GROUP)
    bound = _bound(gang)
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(composites):
        report = composite_report(gang, key, bound)
        if report is not None:
            out[key] = report
    return out


def composite_report(gang: GangScheduling, key: str, bound: Callable[[str], int]) -> dict[str, Any] | None:
    """One CompositePodGroup's report (``bound``: a PodGroup's members bound); None when it does not exist."""
    pod_groups, composites = gang.handle.objects(POD_GROUP), gang.handle.objects(COMPOSITE_POD_GROUP)
    cpg = gang._parsed_composites.get(key)
    if not isinstance(cpg, CompositePodGroup):
        return {"reason": str(cpg)} if cpg is not None else None
    tree = build_tree(pod_groups, composites, key)
    if tree is None:
        return None
    placed = _children(gang, tree, bound)
    report: dict[str, Any] = {
        "policy": "basic" if cpg.gang_min_group_count is None else "gang",
        "minGroupCount": cpg.min_count,
        "children": len(tree.children),
        "childrenReady": _children(gang, tree, gang.members.count),
        "childrenPlaced": placed,
        "members": sum(gang.members.count(leaf.key) for leaf in tree.leaves()),
        "placed": sum(bound(leaf.key) for leaf in tree.leaves()),
    }
    if (parent := parent_composite_name(composites.get(key))) is not None:
        report["parent"] = parent
    if placed < cpg.min_count and (reason := composite_wait_reason(gang, key)) is not None:
        report["reason"] = reason
    return report


def hierarchy_lines(gang: GangScheduling, pod_group_key: str) -> list[str]:
    """For ``explain``: each CompositePodGroup above the PodGroup ``pod_group_key``, nearest first,
    with its children placed and ready against ``minGroupCount``."""
    composites = gang.handle.objects(COMPOSITE_POD_GROUP)
    namespace = pod_group_key.split("/", 1)[0]
    bound = _bound(gang)
    lines: list[str] = []
    seen: set[str] = set()
    name = parent_composite_name(gang.handle.objects(POD_GROUP).get(pod_group_key))
    while name is not None and (key := f"{namespace}/{name}") not in seen:
        seen.add(key)
        report = composite_report(gang, key, bound)
        if report is None:
            lines.append(f"CompositePodGroup {key}: does not exist")
            break
        if "minGroupCount" not in report:
            lines.append(f"CompositePodGroup {key}: {report['reason']}")
        else:
            lines.append(f"CompositePodGroup {key}: {report['childrenPlaced']}/{report['minGroupCount']} children "
                         f"placed, {report['childrenReady']}/{report['children']} ready, {report['members']} members")
        name = parent_composite_name(composites.get(key))
    return lines


def _bound(gang: GangScheduling) -> Callable[[str], int]:
    waiting = gang.handle.waiting_pods

    def bound(key: str) -> int:
        return sum(1 for uid in gang.members.assigned_of(key) if waiting.get(uid) is None)

    return bound


def _children(gang: GangScheduling, tree: PodGroupInfo, count: Callable[[str], int]) -> int:
    return sum(1 for child in tree.children if gang._ready(child, count))


def composite_wait_reason(gang: GangScheduling, key: str) -> str | None:
    """Why the CompositePodGroup ``key`` is not placed: the failure of its last cycle, or the tree of
    its root short of members (PreEnqueue's words), or a missing CompositePodGroup above it."""
    failure = gang._failure.get(f"compositepodgroup/{key}")
    if failure:
        return f"waiting for CompositePodGroup {key}: {failure}"
    namespace = key.split("/", 1)[0]
    composites = gang.handle.objects(COMPOSITE_POD_GROUP)
    parent = parent_composite_name(composites.get(key))
    if parent is None:
        tree = build_tree(gang.handle.objects(POD_GROUP), composites, key)
    else:
        tree, missing = gang._tree(namespace, parent)
        if tree is None:
            return f"waiting for CompositePodGroup {key}: {missing}"
    if tree is not None and not gang._ready(tree, gang.members.count):
        return f'waiting for CompositePodGroup {key}: waiting for composite pod group "{tree.name}" tree to meet quorum'
    return None
