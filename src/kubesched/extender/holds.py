"""Pods the extender approved and the kube-scheduler may be binding: held in its cache.

The extender protocol has no Reserve: kube-scheduler assumes a pod in *its* cache and binds it,
and the extender learns of the placement only when its watch sees the bind (or when it serves the
``bind`` verb). Between the two, every filter call would count the node's scarce resources as free,
so a burst over-commits. The extender therefore remembers what it approved, the way upstream's
scheduler cache keeps assumed pods (pkg/scheduler/backend/cache/cache.go):

* ``hold`` — PreFilter and Filter for the one node (the state Reserve plugins read; or the filter
  verb's own run of them for this pod, when the node passed there and nothing changed since), then
  ``AssumePod`` in the extender's cache and the profile's Reserve plugins: every plugin that counts
  assumed pods (UnderlayIP's IP column, resource fit, ports) or reserves in Reserve (VolumeBinding)
  sees the pod as placed. A pod held again is released first (a retry means the previous attempt
  did not bind).
* ``pin`` — the extender is binding the pod: the hold no longer expires and stays until the bind
  fails or the watch confirms the pod (upstream expires an assumed pod only after FinishBinding and
  only with a non-zero TTL, which kube-scheduler no longer sets: kubernetes#106361).
* the watch confirms (``SchedulerCache.assumed_observer``): the pod on the held node replaces the
  assumed one (upstream ``AddPod`` of an assumed pod); on another node the hold is undone
  (Unreserve, ``ForgetPod``) before the real placement is accounted; a pod deleted or terminated is
  undone the same way.
* ``release`` — Unreserve (every plugin, in reverse order) and ``ForgetPod``: a retry, a failed bind.
* ``expire`` — holds not bound by the extender and not confirmed within ``timeout`` seconds are
  released (upstream ``cleanupAssumedPods``); the caller sweeps before each answer, so an expired
  hold never counts.

Single-threaded like the rest of the service: no call here awaits.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kubesched.backend.cache import SchedulerCache
from kubesched.extender.limits import DEFAULT_HOLD_TIMEOUT
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.runtime import Framework
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray

log = logging.getLogger("kubesched.extender")

#: Why holds ended, for metrics and logs.
RELEASE_REASONS = ("confirmed", "elsewhere", "deleted", "retried", "bind_failed", "expired")


@dataclass(slots=True)
class Hold:
    pod: PodInfo  # the assumed pod (node_name set)
    node: str
    state: CycleState  # the state Reserve ran with: Unreserve gets the same one
    framework: Framework
    deadline: float  # math.inf once the extender's bind succeeded


class InFlightHolds:
    def __init__(
        self, cache: SchedulerCache, timeout: float = DEFAULT_HOLD_TIMEOUT, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.cache = cache
        self.timeout = timeout
        self._now = now
        self._holds: dict[str, Hold] = {}
        #: uid → deadline of the holds that can expire, in deadline order (one timeout for all).
        self._expiring: OrderedDict[str, float] = OrderedDict()
        self.ended: dict[str, int] = dict.fromkeys(RELEASE_REASONS, 0)
        cache.assumed_observer = self._settled

    def __len__(self) -> int:
        return len(self._holds)

    def get(self, uid: str) -> Hold | None:
        return self._holds.get(uid)

    def node_of(self, uid: str) -> str | None:
        h = self._holds.get(uid)
        return None if h is None else h.node

    # -- holding ----------------------------------------------------------------------------------
    def hold(self, fwk: Framework, pod: PodInfo, node: str, checked: CycleState | None = None) -> Status:
        """Assume ``pod`` on ``node`` and run Reserve (after PreFilter + Filter there). Success, or
        the rejecting/error Status, in which case nothing is held.

        ``checked``: the state of a PreFilter + Filter run of this pod with ``fwk`` in which ``node``
        passed, the caller vouching that nothing it reads has changed since (the cache's table
        generation and the cluster's informer events are as they were then). That run is the check
        (the same inputs give the same verdict) and its state goes to Reserve, as upstream's one
        CycleState per scheduling cycle does. Releasing a previous hold of the pod here changes
        the table, so the pod is then checked afresh."""
        if self.release(pod.uid, "retried"):
            checked = None
        table = self.cache.table
        row = table.row_of(node)
        if row is None:
            return Status.unresolvable(f'node "{node}" is not in the extender\'s node cache')
        if table.pod(pod.uid) is not None:
            return SUCCESS  # the watch already has it bound: counted as it is
        if checked is not None:
            state = checked
        else:
            state = CycleState()
            diagnosis = Diagnosis()
            passing, st = fwk.filter_rows(state, pod, np.array([row], dtype=np.intp), diagnosis)
            if not st.is_success:
                return st
            if not len(passing):
                rejected = diagnosis.node_to_status.get(row)
                return rejected if rejected is not None else Status.unschedulable(f'node "{node}" did not pass')
        assumed = self.cache.assume(pod, node)
        st = fwk.run_reserve(state, assumed, node)
        if not st.is_success:
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget(pod.uid)
            return st
        deadline = self._now() + self.timeout
        self._holds[pod.uid] = Hold(assumed, node, state, fwk, deadline)
        self._expiring[pod.uid] = deadline
        return SUCCESS

    def pin(self, uid: str) -> None:
        """The extender is binding the pod: held until the bind fails or the watch confirms it,
        without expiry (upstream expires nothing before FinishBinding, and nothing after it)."""
        h = self._holds.get(uid)
        if h is not None:
            h.deadline = math.inf
            self._expiring.pop(uid, None)

    # -- releasing --------------------------------------------------------------------------------
    def release(self, uid: str, reason: str) -> bool:
        """Unreserve and forget ``uid``'s hold; False when it holds nothing."""
        h = self._holds.pop(uid, None)
        if h is None:
            return False
        self._expiring.pop(uid, None)
        # Upstream's order on a failed attempt: Unreserve, then ForgetPod.
        h.framework.run_unreserve(h.state, h.pod, h.node)
        self.cache.forget(uid)
        self.ended[reason] += 1
        return True

    def expire(self) -> int:
        """Release the holds whose time is up; how many."""
        now = self._now()
        expired = 0
        while self._expiring:
            uid, deadline = next(iter(self._expiring.items()))
            if deadline > now:
                break
            h = self._holds[uid]
            log.info("extender: pod %s approved for node %s not seen bound within %gs: released",
                     h.pod.key, h.node, self.timeout)
            self.release(uid, "expired")
            expired += 1
        return expired

    def _settled(self, assumed: PodInfo, real: PodInfo | None) -> None:
        """The watch's view of an assumed pod, before the cache applies it."""
        h = self._holds.get(assumed.uid)
        if h is None:
            return
        if real is not None and real.node_name == h.node:
            del self._holds[assumed.uid]
            self._expiring.pop(assumed.uid, None)
            self.ended["confirmed"] += 1
            return  # the cache swaps the real pod in for the assumed one
        self.release(assumed.uid, "deleted" if real is None else "elsewhere")


def prefer(scores: IntArray, best: int) -> None:
    """Make ``scores[best]`` the only top score: the nodes tied with it get one less (or it one
    more, when the tie is at 0). The pod is held on ``best``; kube-scheduler adds its own scores and
    breaks ties at random, so without this it would bind a tied node elsewhere about half the time
    and the node it chose would be under-counted until the watch saw the bind."""
    top = scores[best]
    tied = scores == top
    if int(np.count_nonzero(tied)) < 2:
        return
    if top > 0:
        scores[tied] -= 1
        scores[best] = top
    else:
        scores[best] = 1
