"""The Filter extension point of a framework: batch filters over node-table rows, and upstream's
two passes for nodes with nominated pods (RunFilterPluginsWithNominatedPods).

Part of the port of pkg/scheduler/framework/runtime/framework.go (RunFilterPlugins,
RunFilterPluginsWithNominatedPods, RunPreFilterExtensionAddPod/RemovePod). ``Framework``
(runtime.py) inherits it; kept apart because it is the one part of the framework with state of
its own to reason about (the signature-verdict cache, the nominated pods put on the table and
taken off again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.filter_cache import SignatureVerdictCache
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, Rows

if TYPE_CHECKING:
    from kubesched.framework.handle import Handle

_ERROR_CODE = Code.ERROR  # a Code.X lookup costs more


def _on_node(pod: PodInfo, node: str) -> PodInfo:
    """``pod.with_node(node)`` for the nominated pods' pass, made once per nomination (kept in the
    pod's memo) rather than on every attempt of every other pod: with a thousand preemptors
    nominated, each attempt puts them all on their nodes."""
    cached = pod.memo.get("_nominated_on")
    if cached is not None and cached[0] is pod and cached[1] == node:
        placed: PodInfo = cached[2]
        return placed
    placed = pod.with_node(node)
    pod.memo["_nominated_on"] = (pod, node, placed)
    return placed


class FilterPoints:
    """Runs the Filter plugins (and PreFilter's AddPod/RemovePod extensions) of a framework."""

    # Set by Framework.__init__.
    handle: Handle
    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    signature_cache: SignatureVerdictCache

    def run_filters(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, *, ascending: bool = False
    ) -> tuple[Rows, Status]:
        """Filter rows through every plugin, stopping at the first rejection per node; returns the
        passing rows (in the order of ``rows``). Rejections are recorded in ``diagnosis`` with the
        rejecting plugin's name. ``ascending``: the caller guarantees that ``rows`` strictly
        increase, which lets cached verdicts answer a run of consecutive rows with slices.

        Nodes with nominated pods of equal or higher priority get upstream's two passes
        (RunFilterPluginsWithNominatedPods, :meth:`filter_node`); when no pod is nominated anywhere
        (the common case) this costs one dict check. When the filters are node-local for this pod
        (:meth:`filters_node_local`) the nominated pods of every such node go on the table
        together for one batch pass, with no CycleState clone."""
        if self.handle.nominated:
            affected = self._nominated_rows(pod, rows)
            if affected is not None:
                if self.filters_node_local(state, pod):
                    return self._run_filters_nominated_together(state, pod, rows, affected, diagnosis)
                return self._run_filters_nominated(state, pod, rows, affected, diagnosis)
        return self._run_filters_batch(state, pod, rows, diagnosis, ascending)

    def filters_node_local(self, state: CycleState, pod: PodInfo) -> bool:
        """Whether a pod added to or removed from one node can change no other node's verdict for
        ``pod`` this cycle: every Filter that runs is ``filter_node_local`` or has a
        ``filter_signature``, and no PreFilter plugin that runs keeps state its
        PreFilterExtensions would update (PodTopologySpread, InterPodAffinity and the volume
        plugins Skip for a pod without constraints, affinity or such volumes)."""
        skipped = state.skip_filter_plugins
        for p in self.pre_filter:
            if p.name not in skipped and p.pre_filter_extensions() is not None:
                return False
        for f in self.filter:
            if f.name in skipped or f.filter_node_local:
                continue
            if f.filter_signature(state, pod) is None:
                return False
        return True

    def _run_filters_nominated_together(
        self, state: CycleState, pod: PodInfo, rows: Rows, affected: Rows, diagnosis: Diagnosis
    ) -> tuple[Rows, Status]:
        table = self.handle.table
        placed: list[PodInfo] = []
        with table.pod_observers_paused():
            try:
                for row in affected.tolist():
                    name = table.names[row]
                    for p in self.handle.nominated[name].values():
                        if p.priority >= pod.priority and p.uid != pod.uid and table.pod(p.uid) is None:
                            placed.append(_on_node(p, name))
                table.add_pods(placed)
                first, st = self._run_filters_batch(state, pod, affected, diagnosis)
            finally:
                table.remove_pods([p.uid for p in placed])
        if not st.is_success:
            return rows[:0], st
        second = rows[~np.isin(rows, affected) | np.isin(rows, first)]
        return self._run_filters_batch(state, pod, second, diagnosis)

    def _nominated_rows(self, pod: PodInfo, rows: Rows) -> Rows | None:
        """Rows of ``rows`` whose node has a nominated pod (other than ``pod``) of equal or
        higher priority, or None."""
        table = self.handle.table
        nominated = self.handle.nominated
        found: list[int] = []
        if len(rows) < len(nominated):  # e.g. preemption's candidates, many preemptors nominated
            names = table.names
            for row in rows.tolist():
                pods = nominated.get(names[row])
                if pods and any(p.priority >= pod.priority and p.uid != pod.uid for p in pods.values()):
                    found.append(row)
            return np.array(found, dtype=np.intp) if found else None
        for node, pods in nominated.items():
            row = table.index.get(node)
            if row is None:
                continue
            if any(p.priority >= pod.priority and p.uid != pod.uid for p in pods.values()):
                found.append(row)
        if not found:
            return None
        affected = rows[np.isin(rows, np.array(found, dtype=np.intp))]
        return affected if len(affected) else None

    def _run_filters_nominated(
        self, state: CycleState, pod: PodInfo, rows: Rows, affected: Rows, diagnosis: Diagnosis
    ) -> tuple[Rows, Status]:
        plain = rows[~np.isin(rows, affected)]
        passing, st = self._run_filters_batch(state, pod, plain, diagnosis)
        if not st.is_success:
            return passing, st
        ok: list[int] = []
        for row in affected.tolist():
            st = self.filter_node(state, pod, row)
            if st.is_success:
                ok.append(row)
            elif st.is_rejected:
                diagnosis.add_rejections(np.array([row], dtype=np.intp), np.ones(1, dtype=np.int32), [st], 1)
            else:
                return rows[:0], st
        if not ok:
            return passing, SUCCESS
        keep = np.isin(rows, np.concatenate((passing, np.array(ok, dtype=np.intp))))
        return rows[keep], SUCCESS

    def filter_node(self, state: CycleState, pod: PodInfo, row: int) -> Status:
        """Every Filter plugin on one node, with the nominated pods (upstream
        RunFilterPluginsWithNominatedPods): when the node has nominated pods of equal or higher
        priority, first with them added (to a clone of ``state``, through PreFilterExtensions, and
        to the node), then without; both must pass. Success, the first rejection, or an Error."""
        nominated = self.handle.nominated.get(self.handle.table.names[row]) if self.handle.nominated else None
        if nominated:
            added = [p for p in nominated.values() if p.priority >= pod.priority and p.uid != pod.uid]
            if added:
                st = self._filter_with_added(state, pod, row, added)
                if not st.is_success:
                    return st
        return self._filter_one(state, pod, row)

    def _filter_one(self, state: CycleState, pod: PodInfo, row: int) -> Status:
        scratch = Diagnosis()
        passing, st = self._run_filters_batch(state, pod, np.array([row], dtype=np.intp), scratch)
        if not st.is_success:
            return st
        if len(passing):
            return SUCCESS
        rejected = scratch.node_to_status.get(row)
        return rejected if rejected is not None else Status.unschedulable()

    def _filter_with_added(self, state: CycleState, pod: PodInfo, row: int, added: list[PodInfo]) -> Status:
        """addGENominatedPods: the pods counted on the node (the table, restored afterwards: the
        cycle is single-threaded) and in a clone of the cycle state, then the filters."""
        table = self.handle.table
        node = NodeInfo(table, row)
        name = table.names[row]
        clone = state.clone()
        placed: list[PodInfo] = []
        try:
            for p in added:
                if table.pod(p.uid) is not None:
                    continue  # already placed (assumed): counted as it is
                assigned = p.with_node(name)
                table.add_pod(assigned)
                placed.append(assigned)
                st = self.run_pre_filter_extension_add_pod(clone, pod, assigned, node)
                if not st.is_success:
                    return st
            return self._filter_one(clone, pod, row)
        finally:
            for p in placed:
                table.remove_pod(p.uid)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        """Every PreFilter plugin's AddPod (plugins skipped this cycle excluded), as upstream
        RunPreFilterExtensionAddPod; an error is wrapped as upstream wraps it."""
        return self._run_pre_filter_extension("AddPod", state, pod, pod_to_add, node)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        """Every PreFilter plugin's RemovePod (upstream RunPreFilterExtensionRemovePod)."""
        return self._run_pre_filter_extension("RemovePod", state, pod, pod_to_remove, node)

    def _run_pre_filter_extension(
        self, which: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status:
        for p in self.pre_filter:
            if p.name in state.skip_filter_plugins:
                continue
            ext = p.pre_filter_extensions()
            if ext is None:
                continue
            call = ext.add_pod if which == "AddPod" else ext.remove_pod
            try:
                st = call(state, pod, other, node)
            except Exception as e:
                st = Status.from_exception(e)
            if not st.is_success:
                return Status.error(f'running {which} on PreFilter plugin "{p.name}": {st.message}', p.name)
        return SUCCESS

    def _run_filters_batch(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, ascending: bool = False
    ) -> tuple[Rows, Status]:
        table = self.handle.table
        plugins = self.filter
        cached = self.signature_cache.verdicts(state, pod, table)
        if cached is not None:
            plugins = plugins[len(self.signature_cache.plugins) :]
            kept = cached.keep_passing(rows, diagnosis, ascending=ascending)
            if not len(kept) and len(rows):
                return kept, SUCCESS
            rows = kept
        skipped = state.skip_filter_plugins
        for p in plugins:
            if p.name in skipped:
                continue
            try:
                verdicts = p.filter_batch(state, pod, table, rows)
            except Exception as e:
                return rows[:0], Status.from_exception(e, p.name)
            if not verdicts.statuses:
                continue
            codes = verdicts.codes
            passing = codes == 0
            kept = rows[passing]
            if len(kept) == len(rows):
                continue
            statuses = verdicts.statuses  # named by their plugin (copies only when one is not)
            if any(s.plugin != p.name for s in statuses):
                statuses = [s.with_plugin(p.name) for s in statuses]
            for code, s in enumerate(statuses, start=1):
                if s.code == _ERROR_CODE and bool((codes == code).any()):
                    return rows[:0], s
            diagnosis.add_rejections(rows, codes, statuses, len(rows) - len(kept))
            rows = kept
            if not len(kept):
                break
        return rows, SUCCESS
