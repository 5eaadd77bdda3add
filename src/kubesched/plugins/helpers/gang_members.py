"""Per-group member index for gang plugins: O(members of a group) counting.

The gang accounting shared by Coscheduling (scheduler-plugins' PodGroup, pods join by label) and
GangScheduling (the Workload API's PodGroup, pods join by ``spec.schedulingGroup``): each plugin
passes the function that names a pod's group (``key_of``); everything else is written once here.

* **assigned** members (assumed or bound) come from the node table's pod observer, so the index is
  exact through assume, forget, bind, delete and nodes leaving;
* **pending** members are kept from what the plugin sees (Coscheduling: every pod the queue pushes
  goes through its QueueSort's ``sort_key``, PreFilter sees the pod of the cycle, Unreserve sends a
  member back to the queue; GangScheduling: every pod entering the queue passes its PreEnqueue)
  and resynchronised from ``handle.pending_pods()`` — on first use, when a group looks short of
  members, and every few seconds of clock time — for what the plugin cannot see: pods
  deleted while pending, gated pods, and in the extender, pending pods kube-scheduler holds;
* **finished** members (Succeeded/Failed) for the PodGroup status, from terminal pods the scheduler
  reports (``pod_terminated``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable


def waiting_note(key: str, min_count: int, exist: int) -> str:
    """Why a member of gang ``key`` is held before any node is tried (its group is short of
    members): one wording for both gang APIs, in ``explain`` and in the simulator's report."""
    return f"waiting for PodGroup {key}: minCount {min_count}, {exist} members exist"


def _discard(groups: dict[str, dict[str, Any]], key: str, uid: str) -> bool:
    """Remove member ``uid`` from group ``key`` (the group too once empty); whether it was there."""
    members = groups.get(key)
    if members is None or members.pop(uid, None) is None:
        return False
    if not members:
        del groups[key]
    return True


#: A full resync of the pending index at most this often (clock seconds) in steady state.
RESYNC_SECONDS = 5.0
#: ... and at most this often when a group looks short of members (a member may be missing).
SHORT_RESYNC_SECONDS = 0.5


class MemberIndex:
    def __init__(
        self,
        table: NodeTable,
        pending_source: Callable[[], Iterable[PodInfo]],
        key_of: Callable[[PodInfo], str | None],
    ) -> None:
        self.table = table
        #: ``namespace/name`` of a pod's group, None for a pod in no group.
        self.key_of = key_of
        self._source = pending_source
        #: Group key → uid → member pod in the node table (assumed or bound).
        self.assigned: dict[str, dict[str, PodInfo]] = {}
        #: Group key → uid → member pod waiting in the queue (or the pod of the current cycle).
        self.pending: dict[str, dict[str, PodInfo]] = {}
        self._pending_key: dict[str, str] = {}
        #: Group key → uid → phase ("Succeeded" / "Failed") of members that terminated and still
        #: exist (scheduler-plugins' PodGroup controller counts the group's pods it lists).
        self.finished: dict[str, dict[str, str]] = {}
        self._finished_key: dict[str, str] = {}
        #: Group key → counter bumped whenever its pending members change (demand caches key on it).
        self.version: dict[str, int] = {}
        self._synced_at: float | None = None
        table.observe_pods(self._observe)

    # -- feeds -------------------------------------------------------------------------------------
    def _observe(self, _row: int, pod: PodInfo, sign: int) -> None:
        key = self.key_of(pod)
        if key is None:
            return
        if sign > 0:
            self.assigned.setdefault(key, {})[pod.uid] = pod
            self._drop_pending(pod.uid)
        else:
            members = self.assigned.get(key)
            if members is not None:
                members.pop(pod.uid, None)
                if not members:
                    del self.assigned[key]

    def note_pending(self, pod: PodInfo, leaving_table: bool = False) -> None:
        """A pod seen waiting for a placement (queued, or the pod of the current cycle);
        ``leaving_table``: an assumed member about to be forgotten and requeued (Unreserve)."""
        key = self.key_of(pod)
        old = self._pending_key.get(pod.uid)
        if old is not None and old != key:
            self._drop_pending(pod.uid)
        if key is None or (not leaving_table and self.table.pod(pod.uid) is not None):
            return
        members = self.pending.setdefault(key, {})
        if members.get(pod.uid) is not pod:
            if pod.uid not in members:
                self.version[key] = self.version.get(key, 0) + 1
            members[pod.uid] = pod
            self._pending_key[pod.uid] = key

    def _drop_pending(self, uid: str) -> None:
        key = self._pending_key.pop(uid, None)
        if key is not None and _discard(self.pending, key, uid):
            self.version[key] = self.version.get(key, 0) + 1

    def note_terminated(self, pod: PodInfo) -> None:
        self.forget_finished(pod.uid)  # reported again, perhaps with another group label
        key = self.key_of(pod)
        if key is None:
            return
        self._drop_pending(pod.uid)
        self.finished.setdefault(key, {})[pod.uid] = pod.phase
        self._finished_key[pod.uid] = key

    def forget_finished(self, uid: str) -> None:
        """A finished member was deleted: no longer counted (nor kept)."""
        key = self._finished_key.pop(uid, None)
        if key is not None:
            _discard(self.finished, key, uid)

    def resync(self, now: float) -> None:
        """Rebuild the pending members from the shell's list of pending pods."""
        pending: dict[str, dict[str, PodInfo]] = {}
        keys: dict[str, str] = {}
        for pod in self._source():
            key = self.key_of(pod)
            if key is not None and self.table.pod(pod.uid) is None:
                pending.setdefault(key, {})[pod.uid] = pod
                keys[pod.uid] = key
        for key in set(pending) | set(self.pending):
            self.version[key] = self.version.get(key, 0) + 1
        self.pending, self._pending_key = pending, keys
        self._synced_at = now

    def maybe_resync(self, now: float, short: bool = False) -> bool:
        """Resync on first use, every RESYNC_SECONDS, or sooner when a group looks short."""
        last = self._synced_at
        if last is None or now - last >= (SHORT_RESYNC_SECONDS if short else RESYNC_SECONDS) or now < last:
            self.resync(now)
            return True
        return False

    # -- reads -------------------------------------------------------------------------------------
    def assigned_of(self, key: str) -> dict[str, PodInfo]:
        return self.assigned.get(key, {})

    def pending_of(self, key: str) -> dict[str, PodInfo]:
        return self.pending.get(key, {})

    def is_pending(self, uid: str) -> bool:
        """The pod ``uid`` is a pending member of some group (as of the last resync or note)."""
        return uid in self._pending_key

    def count(self, key: str, pod: PodInfo | None = None) -> int:
        """Members that exist and are not terminal: placed, pending, and ``pod``."""
        n = len(self.assigned_of(key)) + len(self.pending_of(key))
        if pod is not None and pod.uid not in self.assigned_of(key) and pod.uid not in self.pending_of(key):
            n += 1
        return n
