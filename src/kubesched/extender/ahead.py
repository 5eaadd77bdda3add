"""The next pod's filter, computed before kube-scheduler asks for it.

kube-scheduler calls the extender synchronously inside its scheduling cycle, one pod at a time:
after the extender's prioritize answer it binds that pod in the background and starts the next
cycle, running its own PreFilter and Filter plugins over its nodes before it calls the extender's
filter. The extender's own PreFilter + Filter for that pod can run in that gap instead of on
kube-scheduler's wait, if the extender knows the pod: its pod informer holds the same
objects kube-scheduler's queue does, in the order its queue pops them (priority, then when the pod
was added; ExtenderCluster.next_pending).

What is computed ahead is used only when it is what a fresh computation would give:

* the pod kube-scheduler sends is the object the guess was parsed from (``same_pod_object``: equal
  in every field but TypeMeta and ``managedFields``, which kube-scheduler's informer drops);
* nothing a plugin may read has changed since (the service's ``_version``: the node table's
  generation, the informers' events, pending pods once a plugin reads them);
* every node the request names was filtered ahead (all of them are: every node of the cache is;
  a node added since changes the version).

Filter's verdict on one node does not depend on which other nodes are judged with it (upstream
runs Filter per node), so the answer for the request's nodes is the one computed for all of them,
restricted to those. A wrong guess costs the CPU of one filter run and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.extender.requests import ClusterView
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.shapes import ShapeError, check_pod_shape
from kubesched.snapshot.table import Rows

log = logging.getLogger("kubesched.extender")

#: kube-scheduler's informer strips managedFields (its informer's transform) and sends no TypeMeta.
_NOT_SENT = ("apiVersion", "kind")


def same_pod_object(sent: Any, watched: dict[str, Any]) -> bool:
    """Whether the pod of a request (``sent``) is the object the watch showed (``watched``): equal
    in every field, but for TypeMeta (kube-scheduler omits it; when sent it must be equal) and
    ``metadata.managedFields``."""
    if not isinstance(sent, dict):
        return False
    sent_meta, watched_meta = sent.get("metadata"), watched.get("metadata")
    if not isinstance(sent_meta, dict) or not isinstance(watched_meta, dict):
        return False
    for key, value in sent.items():
        if key != "metadata" and (key not in watched or watched[key] != value):
            return False
    if any(key not in sent for key in watched if key != "metadata" and key not in _NOT_SENT):
        return False
    for key, value in sent_meta.items():
        if key != "managedFields" and (key not in watched_meta or watched_meta[key] != value):
            return False
    return all(key in sent_meta for key in watched_meta if key != "managedFields")


def watched_pod(cluster: ClusterView, sent: Any) -> PodInfo | None:
    """The pending pod the watch showed, parsed by the pod informer, when a request's pod
    (``sent``) is that object (``same_pod_object``) and passes the checks a request's pod gets
    (``shape_checked``); else None (the request's pod is parsed then). A pending pod reaches
    kube-scheduler through its own watch of the same objects, so the extender parses each pod
    once instead of again for its filter request."""
    if not isinstance(sent, dict):
        return None
    meta = sent.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    if not isinstance(uid, str) or not uid:
        return None
    watched = cluster.pending_pod(uid)
    if watched is None or not same_pod_object(sent, watched.raw) or not shape_checked(watched):
        return None  # (a shape error: parse_pod reports it for the request's pod)
    return watched


#: PodInfo.memo key: whether check_pod_shape passed for the pod's raw object.
_SHAPE_CHECKED = "_extender_shape_checked"


def shape_checked(pod: PodInfo) -> bool:
    """Whether ``check_pod_shape(pod.raw)`` passes, what parse_pod checks of a request's pod;
    remembered in the pod's memo (a PodInfo's raw object never changes, and its copies that
    share the memo differ in ``spec.nodeName`` alone, a string either way). It reads neither
    TypeMeta nor ``managedFields``, so it answers the same for a request's pod that is this
    object (``same_pod_object``)."""
    checked = pod.memo.get(_SHAPE_CHECKED)
    if checked is None:
        try:
            check_pod_shape(pod.raw)
            checked = True
        except ShapeError:
            checked = False
        pod.memo[_SHAPE_CHECKED] = checked
    return bool(checked)


@dataclass(slots=True)
class FilterAhead:
    """A pod's PreFilter + Filter run over ``rows`` of the live node table at ``version``: the
    state PreFilter left (prioritize and the hold reuse it, as after a filter request), and per
    table row whether it was filtered and whether it passed."""

    pod: PodInfo
    version: tuple[int, int, int]
    state: CycleState
    diagnosis: Diagnosis
    filtered: npt.NDArray[np.bool_]
    passed: npt.NDArray[np.bool_]

    def verdicts(self, candidates: Rows) -> tuple[Rows, list[tuple[int, Status]]] | None:
        """The candidates that passed (ascending, as ``candidates``) and each rejected one's
        Status; None when a candidate was not filtered ahead."""
        if not len(candidates):
            return candidates, []
        if int(candidates.max()) >= len(self.filtered) or not self.filtered[candidates].all():
            return None
        ok = self.passed[candidates]
        rejected: list[tuple[int, Status]] = []
        statuses = self.diagnosis.node_to_status
        for row in candidates[~ok].tolist():
            status = statuses.get(row)
            if status is None:
                return None
            rejected.append((row, status))
        return candidates[ok], rejected


def filter_ahead(fwk: Framework, pod: PodInfo, rows: Rows, size: int, version: tuple[int, int, int]
                 ) -> FilterAhead | None:
    """``pod``'s PreFilter + Filter over ``rows`` (of a table of ``size`` rows), or None when it
    did not succeed with PreFilter passing (an error or a PreFilter rejection: the request then
    computes and reports it as always)."""
    state, diagnosis = CycleState(), Diagnosis()
    ok_rows, st = fwk.filter_rows(state, pod, rows, diagnosis)
    if not st.is_success or diagnosis.pre_filter_msg:
        return None
    filtered = np.zeros(size, dtype=np.bool_)
    filtered[rows] = True
    passed = np.zeros(size, dtype=np.bool_)
    passed[ok_rows] = True
    return FilterAhead(pod, version, state, diagnosis, filtered, passed)


#: After this many wrong guesses in a row, guess only every GUESS_PROBE-th pod: a wrong guess costs
#: a filter run's CPU on a machine kube-scheduler shares.
GUESS_MISSES = 3
GUESS_PROBE = 16
#: Filter ahead only when kube-scheduler sends at least 1/ALL_NODES_AT_MOST of the nodes: on a larger
#: cluster it samples (percentageOfNodesToScore), and filtering every node would cost more than it saves.
ALL_NODES_AT_MOST = 4


class NextPod:
    """The guess of the next pod and its filter run, and how the guesses went."""

    def __init__(self) -> None:
        self._ahead: FilterAhead | None = None
        #: Wrong guesses in a row, and pods passed over since guessing was paused.
        self._misses = 0
        self._paused = 0

    def forget(self) -> None:
        self._ahead = None

    def pod_sent(self, raw: Any) -> PodInfo | None:
        """The pod filtered ahead, when ``raw`` (a request's pod) is that object."""
        ahead = self._ahead
        if (ahead is not None and isinstance(raw, dict) and isinstance(raw.get("metadata"), dict)
                and raw["metadata"].get("uid") == ahead.pod.uid and same_pod_object(raw, ahead.pod.raw)):
            return ahead.pod
        return None

    def take(self, pod: PodInfo) -> FilterAhead | None:
        """The run filtered ahead, when it was for ``pod`` (the caller checks it is still current)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        if ahead.pod is not pod:
            self._misses += 1
            return None
        self._misses = 0
        return ahead

    def filter_ahead(self, cluster: ClusterView, fwk: Framework, answered: Container[str], last_list: int,
                     version: tuple[int, int, int]) -> None:
        """Guess the next pod (not in ``answered``) and filter it over every node of ``cluster``'s
        cache with ``fwk`` (the live framework) at ``version``; ``last_list``: how many nodes the
        last filter request named."""
        self._ahead = None
        if self._misses >= GUESS_MISSES:
            # kube-scheduler's order is not the watch's here (e.g. a backlog its informer listed:
            # client-go's watch-list hands the items over from a map, in random order): guess
            # only now and then, to notice when it is again.
            self._paused += 1
            if self._paused % GUESS_PROBE:
                return
        pod = cluster.next_pending(answered)
        table = cluster.cache.table
        rows = table.alive_rows()
        if pod is None or not len(rows) or len(rows) > ALL_NODES_AT_MOST * max(last_list, 1):
            return
        if not shape_checked(pod):  # what parse_pod checks of a request's pod
            return
        try:
            self._ahead = filter_ahead(fwk, pod, rows, len(table.names), version)
        except Exception:  # the request computes (and reports) it as always
            log.debug("extender: filter not computed ahead for %s", pod.key, exc_info=True)
