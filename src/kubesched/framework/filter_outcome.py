"""A failed Filter pass reused for an identical pod while nothing the filters read has changed.

Pods left unschedulable are retried at every flush of the unschedulable pods
(``podMaxInUnschedulablePodsDuration``), hundreds back to back with nothing placed or removed in
between, and many of them have the shape of a pod that has just failed (on the ATC '23 openb
replay 57 % of the failed attempts). Their Filter pass would reject the same nodes with the same
statuses. This cache keeps such a pass — its node statuses, frozen — under a key made of
everything the pass reads:

* the pod's shape (:func:`pod_shape`);
* the node table's ``generation`` (moved by every node and pod change);
* for each PreFilter and Filter plugin that ran, its ``filter_signature`` for the pod, or else its
  ``filter_outcome_key`` (what it reads besides, e.g. a counter of state it keeps itself); one
  with neither (the default) turns the cache off for the attempt;
* the plugins whose PreFilter returned Skip;
* where the rotating search starts and, when it samples (``percentageOfNodesToScore`` below
  100), the recent share that sizes its windows: the statuses keep the order of evaluation.

It is consulted only when no pod is nominated (their pass puts them on nodes), PreFilter narrowed
no node, and it keeps only passes that found no feasible node (one that finds a node is followed
by a placement, which changes the table). Only the Filter pass is skipped: PreFilter, PostFilter
(preemption draws from the scheduler's RNG) and the failure's bookkeeping run as before, so every
attempt, message and record is the one the pass would have given. The frozen statuses also keep
what is derived from them (the FitError text, the rejecting plugins, preemption's split of the
rows), computed once per pass instead of once per attempt; nothing can add to them
(``NodeToStatus.freeze``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Final

import orjson

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import NodeToStatus
from kubesched.framework.interfaces import FilterPlugin, Plugin
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

#: Metadata that names or dates a pod rather than saying where it may run: left out of its shape.
IDENTITY_FIELDS: Final = frozenset(
    {"name", "generateName", "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
     "selfLink"})
#: Bound on the passes kept for one table generation (they all go when it moves).
MAX_ENTRIES: Final = 1024


def pod_shape(pod: PodInfo) -> bytes:
    """What of the pod a plugin that opts in (``Plugin.filter_outcome_key``) may read: its spec and
    its metadata but for name, uid and times (``IDENTITY_FIELDS``), as canonical JSON. Made
    from the raw object on every call: shells may update a pod's maps in place."""
    raw = pod.raw
    meta = raw.get("metadata") or {}
    kept = {k: v for k, v in meta.items() if k not in IDENTITY_FIELDS}
    return orjson.dumps((kept, raw.get("spec")), option=orjson.OPT_SORT_KEYS)


def plugin_key_parts(
    plugins: Sequence[Plugin], state: CycleState, pod: PodInfo, key_of: Callable[[Plugin], Hashable | None]
) -> tuple[Hashable, ...] | None:
    """What the attempt's running PreFilter/Filter plugins read, one part each: a Filter plugin's
    ``filter_signature``, else ``("key", key_of(plugin))``; None when a plugin can say neither
    (then nothing may be reused). Shared by the failed-pass reuse and the incremental pass."""
    skipped = state.skip_filter_plugins
    parts: list[Hashable] = []
    for p in plugins:
        if p.name in skipped:
            continue
        part = p.filter_signature(state, pod) if isinstance(p, FilterPlugin) else None
        if part is None:
            part = key_of(p)
            if part is None:
                return None
            part = ("key", part)
        parts.append(part)
    return tuple(parts)


class FilterOutcomeCache:
    """One framework's failed Filter passes of the current table generation."""

    def __init__(self, pre_filter: Sequence[Plugin], filters: Sequence[FilterPlugin]) -> None:
        #: Every plugin whose PreFilter or Filter may run, once, in order.
        self.plugins: list[Plugin] = list(dict.fromkeys([*pre_filter, *filters]))
        self._entries: dict[tuple[Hashable, ...], NodeToStatus] = {}
        self._generation = -1
        #: Hits and passes kept, for tests and benchmarks.
        self.hits = 0
        self.stored = 0

    def key(
        self, state: CycleState, pod: PodInfo, table: NodeTable, start: int, share: float | None,
        shape: bytes | None = None,
    ) -> tuple[Hashable, ...] | None:
        """The key of this attempt's Filter pass, or None when a plugin that runs cannot say what
        it reads. ``start``: the search's first position; ``share``: the share that sizes its
        windows, or None when it filters every node in one window; ``shape``: ``pod_shape(pod)``
        if the caller made it already."""
        skipped = state.skip_filter_plugins
        parts = plugin_key_parts(self.plugins, state, pod, lambda p: p.filter_outcome_key(state, pod))
        if parts is None:
            return None
        return (pod_shape(pod) if shape is None else shape, table.generation, parts, frozenset(skipped),
                start, share)

    def get(self, key: tuple[Hashable, ...], table: NodeTable) -> NodeToStatus | None:
        if table.generation != self._generation:
            self._entries.clear()
            self._generation = table.generation
            return None
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, key: tuple[Hashable, ...], table: NodeTable, statuses: NodeToStatus) -> None:
        """Keep a pass that found no feasible node; its statuses are frozen from now on."""
        if table.generation != self._generation:
            self._entries.clear()
            self._generation = table.generation
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        statuses.freeze()
        self._entries[key] = statuses
        self.stored += 1
