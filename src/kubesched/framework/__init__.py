"""kubesched's plugin API: everything a plugin author imports, from one place.

    from kubesched.framework import FilterPlugin, ScorePlugin, Status, CycleState, NodeInfo, PodInfo

As upstream separates ``k8s.io/kube-scheduler/framework`` (what plugins see) from
``pkg/scheduler/framework/runtime`` (what runs them), the names below are the public, stable
surface; the modules behind them (``kubesched.framework.runtime``, ``kubesched.backend``, ...) are
machinery and may change. ``tests/unit/architecture/test_public_api.py`` holds this list. Test builders
for plugins are in :mod:`kubesched.testing`.
"""

from kubesched.framework.clock import Clock, FakeClock, RealClock
from kubesched.framework.cycle_state import CycleState, StateData
from kubesched.framework.handle import BindConflictError, ClusterClient, Handle, PodGoneError, add_binding_annotations
from kubesched.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.labels import LabelSelector
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.objects import ObjectKind
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import (
    EVENT_NODE_ADD,
    EVENT_POD_DELETE,
    EVENT_WILDCARD,
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
    Verdicts,
)
from kubesched.snapshot.pod import HostPort, PodInfo
from kubesched.snapshot.table import IntArray, NodeInfo, NodeTable, Rows, Taint

__all__ = [
    "EVENT_NODE_ADD",
    "EVENT_POD_DELETE",
    "EVENT_WILDCARD",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "NODE",
    "POD",
    "SUCCESS",
    "ActionType",
    "BindConflictError",
    "BindPlugin",
    "Clock",
    "ClusterClient",
    "ClusterEvent",
    "Code",
    "CycleState",
    "FakeClock",
    "FilterPlugin",
    "Handle",
    "HostPort",
    "IntArray",
    "LabelSelector",
    "NodeInfo",
    "NodeTable",
    "ObjectKind",
    "PermitPlugin",
    "Plugin",
    "PodGoneError",
    "PodInfo",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "RealClock",
    "ReservePlugin",
    "Rows",
    "ScorePlugin",
    "Scores",
    "StateData",
    "Status",
    "Taint",
    "Verdicts",
    "add_binding_annotations",
    "default_normalize_score",
]
