"""Preemption actuated, as upstream's executor (pkg/scheduler/framework/preemption/executor.go):
victims waiting at Permit are rejected in memory, the others evicted through the client; the
lower-priority pods nominated to the node lose their nomination; and the preemptor is held back
(DefaultPreemption's PreEnqueue asks :meth:`PreemptionExecutor.running`) until its evictions are
sent and its last victim is terminating or gone. One executor per scheduler, shared by its
profiles; a PodGroup's preemption is keyed by the group when the PodGroup cycle runs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from kubesched.framework.handle import PodGoneError, PreemptFn, Preemptor
from kubesched.framework.podgroup import group_key
from kubesched.framework.runtime import Framework
from kubesched.snapshot.pod import PodInfo

if TYPE_CHECKING:
    from kubesched.scheduler import Scheduler

#: The scheduler's logger: an eviction that failed is the scheduler's to report.
log = logging.getLogger("kubesched.scheduler")

#: Prefix of a PodGroup's key among the preemptors under way (:meth:`PreemptionExecutor.preemptor_key`):
#: never a uid (a simulator's uid may be namespace/name).
_GROUP_PREEMPTOR = "podgroup:"


class PreemptionExecutor:
    def __init__(self, scheduler: Scheduler, by_group: bool) -> None:
        self._scheduler = scheduler
        #: The PodGroup cycle runs: a member's preemption is its group's.
        self._by_group = by_group
        #: Preemptions under way (upstream executor's ``preempting``): preemptor key (the pod's
        #: uid, or its PodGroup's key when the PodGroup cycle runs: ``preemptor_key``) →
        #: evictions not yet sent, and → its last victim (done once that one is gone or terminating).
        self.preempting: dict[str, int] = {}
        self.last_victim: dict[str, str] = {}
        #: Victims whose eviction was sent (or found them gone) while the cache still shows them
        #: alive: terminating by preemption until the informer shows their deletion
        #: (Handle.terminating_by_preemption says why).
        self.evicted: set[str] = set()

    # -- the shell's view of the victims ---------------------------------------------------------------
    def seen(self, pod: PodInfo) -> None:
        """A pod's new state: a victim the watch shows terminating is no longer only evicted here."""
        if self.evicted and pod.deleting:
            self.evicted.discard(pod.uid)

    def forget(self, uid: str) -> None:
        """A pod deleted."""
        self.evicted.discard(uid)

    # -- actuation -----------------------------------------------------------------------------------
    def for_framework(self, fwk: Framework) -> PreemptFn:
        def preempt(preemptor: PodInfo, node_name: str, victims: Sequence[PodInfo], by: Preemptor | None) -> None:
            self.preempt(fwk, preemptor, node_name, victims, by)

        return preempt

    def preempt(
        self, fwk: Framework, preemptor: PodInfo, node_name: str, victims: Sequence[PodInfo], by: Preemptor | None,
    ) -> None:
        """Actuate a preemption (upstream executor.go prepareCandidate): a victim waiting at Permit
        is rejected in memory, a victim already being deleted (or evicted by this scheduler, the watch
        not yet showing it) is left alone, the others are evicted
        through the client (``evict``, when it has one); lower-priority pods nominated to the node
        lose their nomination and are retried. ``by``: who preempts, as the victims are told (the
        pod itself on ``node_name`` when None)."""
        by = by or Preemptor.of_pod(preemptor, node_name)
        evict = getattr(fwk.handle.client, "evict", None)
        to_evict = []
        in_memory: list[str] = []
        for victim in victims:
            wp = self._scheduler.waiting_pods.get(victim.uid)
            if wp is not None and not wp.decided:
                self._scheduler.waiting_pods.reject(victim.uid, "", "preempted")
                in_memory.append(victim.uid)
                continue
            if victim.deleting or victim.uid in self.evicted or evict is None:
                continue
            to_evict.append(victim)
        if to_evict:
            assert evict is not None
            # Until the evictions are sent and the last victim is seen terminating or gone, the
            # preemptor is held back (DefaultPreemption's PreEnqueue), as upstream's executor.
            # A group's preemption evicts on many nodes, one call each: the group waits for them all
            # (upstream's executor actuates a PodGroup's victims as one candidate, keyed by the group).
            key = self.preemptor_key(preemptor)
            self.preempting[key] = self.preempting.get(key, 0) + len(to_evict)
            self.last_victim[key] = to_evict[-1].uid
            for victim in to_evict:
                self._scheduler.spawn_task(self._evict(evict, victim, key, by, self.eviction_sent))
        nominator = self._scheduler.queue.nominator
        # getLowerPriorityNominatedPods(candidate name): a group's candidate, ``cluster``, is no
        # node, so upstream clears no nomination for a group preemption.
        cleared = [p for p in nominator.pods_for_node(by.candidate) if p.priority < preemptor.priority]
        for p in cleared:
            nominator.delete(p.uid)
        if cleared:
            self._scheduler.queue.activate([p.uid for p in cleared])
        observer = self._scheduler.observer  # read now: the simulator replaces it after construction
        observer.preempted(preemptor, fwk.profile_name, node_name, list(victims), cleared, by, in_memory)

    @staticmethod
    async def _evict(
        evict: Callable[[PodInfo, Preemptor], Coroutine[Any, Any, None]], victim: PodInfo, key: str,
        by: Preemptor, sent: Callable[[str, str, bool], None],
    ) -> None:
        """One victim's eviction. A victim already gone is done; any other error is never the
        scheduler's end: it is logged (upstream executor.go PreemptPod logs "Could not add
        DisruptionTarget condition due to preemption" / "Tried to preempted pod" at error level)
        and ends the preemptor's hold, so it retries and preempts again if it must."""
        failed = True
        try:
            await evict(victim, by)
            failed = False
        except PodGoneError:
            failed = False
        except Exception as e:
            log.warning("pod=%s preemptor=%s %s node=%s event=eviction_failed error=%r", victim.key, by.type,
                        by.uid, victim.node_name, e)
        finally:
            sent(key, victim.uid, failed)

    def preemptor_key(self, pod: PodInfo) -> str:
        """Whose preemption ``pod`` waits for: its PodGroup's when the PodGroup cycle runs
        (DefaultPreemption's PreEnqueue checks the group, IsPodGroupRunningPreemption), else its own."""
        if self._by_group and (key := group_key(pod)) is not None:
            return _GROUP_PREEMPTOR + key
        return pod.uid

    def eviction_sent(self, key: str, victim_uid: str, failed: bool = False) -> None:
        if not failed and (victim := self._scheduler.cache.table.pod(victim_uid)) is not None and not victim.deleting:
            self.evicted.add(victim_uid)  # until the informer shows it terminating or gone
        if failed:
            # The last victim may never go (upstream executor: an error ends the preemption, the
            # preemptor is no longer held): without this it would wait at PreEnqueue for good.
            self.last_victim.pop(key, None)
        left = self.preempting.get(key, 0) - 1
        if left > 0:
            self.preempting[key] = left
            return
        self.preempting.pop(key, None)
        group = key.removeprefix(_GROUP_PREEMPTOR)
        if group == key:
            # Re-run its PreEnqueue now: released if the last victim is already gone, else the
            # victim's deletion event releases it.
            self._scheduler.queue.activate([key])
            return
        # A group's members wait for the victims' deletion events, as upstream's (its executor
        # activates them only when no such event will come): here, when the last victim was
        # already gone before its eviction returned.
        last = self.last_victim.get(key)
        if last is None or self._scheduler.cache.table.pod(last) is None:
            self._scheduler.queue.activate(self._scheduler.queue.group_members(group))

    def running(self, pod: PodInfo) -> bool:
        """upstream Executor.IsPodRunningPreemption (see Handle.preemption_running)."""
        preemptor_uid = self.preemptor_key(pod)
        if preemptor_uid in self.preempting:
            return True
        last = self.last_victim.get(preemptor_uid)
        if last is None:
            return False
        victim = self._scheduler.cache.table.pod(last)
        if victim is None or victim.deleting:
            del self.last_victim[preemptor_uid]
            return False
        return True
