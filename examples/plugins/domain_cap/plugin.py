"""DomainCap: at most ``maxPods`` selected pods per topology domain, spread over the domains.

See the package docstring (``__init__.py``) for what it is for and how to enable it. This module
is also the worked example of ``docs/plugins.md``; each extension point shows one technique:

* a **plugin-defined pod column** (``register_pod_column``) counts the selected pods per node, so
  the count is exact through assume/forget/bind/delete and rebuilt when the scheduler starts;
* **PreFilter** returns ``Skip`` for pods the cap does not apply to, and otherwise sums the column
  per domain once per cycle into **CycleState** (a value with ``clone()``);
* **Filter** is the **batch form**: two numpy gathers over the candidate rows, no Python loop;
* **PreScore** skips Score for the same pods PreFilter skipped;
* **Score** is the **per-node form** (``score(state, pod, node)``) reading the CycleState dict,
  and **NormalizeScore** maps the raw counts to 0–100, fewest selected pods first;
* **events_to_register** names the cluster events that can free a slot, so a rejected pod is
  retried when one happens and not on every unrelated change.

No Reserve is needed: the scheduling cycle is serial and the assumed pod is added to the node
table (and so to the column) before the next pod's PreFilter runs; a failed bind forgets the
assumed pod, which takes it out of the column again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubesched.framework import (
    NODE,
    POD,
    SUCCESS,
    ActionType,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    Handle,
    NodeInfo,
    NodeTable,
    PodInfo,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    Rows,
    ScorePlugin,
    Scores,
    Status,
    Verdicts,
    default_normalize_score,
)

from .args import DomainCapArgs

NAME = "DomainCap"
#: CycleState key. Prefix keys with the plugin name: every plugin of the profile shares the store.
STATE_KEY = "PreFilter" + NAME
REASON_FULL = "node(s) were in a topology domain that reached its pod cap"


@dataclass(slots=True)
class _State:
    """Per-cycle state written by PreFilter, read by Filter, PreScore and Score.

    ``lut[code]`` is the number of selected pods in the domain whose label-value code is ``code``
    (``LabelColumn`` codes); the extra last entry is 0 so that code -1 (node without the label)
    indexes it. ``by_value`` is the same, keyed by label value, for the per-node Score.
    """

    lut: npt.NDArray[np.int64]
    by_value: dict[str, int]

    def clone(self) -> _State:
        # PreFilterExtensions mutate the state of a cloned CycleState: copy what they mutate.
        return _State(self.lut.copy(), dict(self.by_value))


class _Extensions(PreFilterExtensions):
    """Keep the per-domain counts right when the runtime adds or removes pods hypothetically."""

    def __init__(self, plugin: DomainCap) -> None:
        self.plugin = plugin

    def _adjust(self, state: CycleState, other: PodInfo, node: NodeInfo, delta: int) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State) or not self.plugin.selected(other):
            return SUCCESS
        value = node.labels.get(self.plugin.args.topology_key)
        if value is None:
            return SUCCESS
        code = node.table.label_column(self.plugin.args.topology_key).values[value]
        s.lut[code] += delta
        s.by_value[value] = s.by_value.get(value, 0) + delta
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status:
        return self._adjust(state, pod_to_add, node, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._adjust(state, pod_to_remove, node, -1)


class DomainCap(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME
    args_model = DomainCapArgs

    def __init__(self, args: DomainCapArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.args: DomainCapArgs = args
        # One column per profile: two profiles may select different pods.
        self._column = f"{NAME}/{handle.profile_name}/selected"
        handle.table.register_pod_column(self._column, lambda p: int(self.selected(p)))
        # Statuses are immutable and shared by every rejected node (cheap Verdicts).
        self._full = Status.unschedulable(REASON_FULL)
        self._no_key = Status.unresolvable(f"node(s) didn't have label {args.topology_key}")
        self._extensions = _Extensions(self)

    def selected(self, pod: PodInfo) -> bool:
        return self.args.pod_selector.matches(pod.labels)

    # -- requeueing ---------------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        # A slot frees up when a selected pod goes away or stops matching the selector; a node
        # that is added or relabelled may open a new domain (or give a node the missing label).
        return (
            ClusterEvent(POD, ActionType.DELETE | ActionType.UPDATE_POD_LABEL, "AssignedPodDelete|Update"),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeAdd|UpdateNodeLabel"),
        )

    # -- PreFilter ----------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not self.selected(pod):
            return None, Status.skip()  # not capped: our Filter is not run for this pod
        col = table.label_column(self.args.topology_key)
        rows = table.alive_rows()
        codes = col.codes[rows]
        in_domain = codes >= 0
        counts = np.bincount(
            codes[in_domain], weights=table.pod_column(self._column)[rows][in_domain], minlength=len(col.values)
        ).astype(np.int64)
        lut = np.append(counts, 0)  # lut[-1] == 0: nodes without the label
        state.write(STATE_KEY, _State(lut, {v: int(counts[c]) for v, c in col.values.items()}))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self._extensions

    # -- Filter: the batch form ---------------------------------------------------------------
    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return Verdicts.from_mask(np.zeros(len(rows), dtype=np.bool_), Status.error(f"{STATE_KEY} not found"))
        codes = table.label_column(self.args.topology_key).codes[rows]
        out = np.zeros(len(rows), dtype=np.int32)
        out[s.lut[codes] + 1 > self.args.max_pods] = 1  # this pod would exceed the cap
        if self.args.nodes_without_key == "Reject":
            out[codes < 0] = 2
        return Verdicts(out, [self._full, self._no_key])

    # -- PreScore / Score: the per-node form --------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        return SUCCESS if STATE_KEY in state else Status.skip()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """Raw score: selected pods already in the node's domain (lower is better, see normalize).
        A node outside every domain scores as a full domain: least preferred."""
        s: _State = state.read(STATE_KEY)
        value = node.labels.get(self.args.topology_key)
        if value is None:
            return self.args.max_pods, SUCCESS
        return s.by_value.get(value, 0), SUCCESS

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        # 0..max(raw) → 100..0: the emptiest domain gets 100 (upstream DefaultNormalizeScore, reverse).
        default_normalize_score(scores, reverse=True)
        return SUCCESS
