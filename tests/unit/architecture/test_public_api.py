"""The plugin API is one import away and does not change by accident."""

from __future__ import annotations

import kubesched.framework as framework

#: Changing this list changes what out-of-tree plugins may rely on: say so in the changelog/docs.
PUBLIC = {
    "ActionType", "BindConflictError", "BindPlugin", "Clock", "ClusterClient", "ClusterEvent", "Code",
    "CycleState", "EVENT_NODE_ADD", "EVENT_POD_DELETE", "EVENT_WILDCARD", "FakeClock", "FilterPlugin",
    "Handle", "HostPort", "IntArray", "LabelSelector",
    "MAX_NODE_SCORE", "MIN_NODE_SCORE", "NODE", "NodeInfo", "NodeTable",
    "ObjectKind", "POD", "PermitPlugin", "Plugin", "PodGoneError", "PodInfo", "PostBindPlugin",
    "PostFilterPlugin", "PostFilterResult", "PreBindPlugin", "PreEnqueuePlugin", "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult", "PreScorePlugin", "QueueSortPlugin", "QueuedPodInfo", "RealClock", "ReservePlugin",
    "Rows", "SUCCESS", "ScorePlugin", "Scores", "StateData", "Status", "Taint", "Verdicts",
    "add_binding_annotations", "default_normalize_score",
}


def test_all_is_the_public_list() -> None:
    assert set(framework.__all__) == PUBLIC
    assert len(framework.__all__) == len(PUBLIC)  # no duplicates


def test_every_public_name_resolves() -> None:
    for name in framework.__all__:
        assert getattr(framework, name) is not None, name


def test_star_import_gives_exactly_the_public_names() -> None:
    ns: dict[str, object] = {}
    exec("from kubesched.framework import *", ns)
    assert {k for k in ns if not k.startswith("__")} == PUBLIC
