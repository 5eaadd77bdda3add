"""The next pod's filter, computed before kube-scheduler asks for it.

kube-scheduler calls the extender synchronously inside its scheduling cycle, one pod at a time:
after the extender's prioritize answer it binds that pod in the background and starts the next
cycle, running its own PreFilter and Filter plugins over its nodes before it calls the extender's
filter. The extender's own PreFilter + Filter for that pod can run in that gap instead of on
kube-scheduler's wait, if the extender knows the pod: its pending-pods informer holds the same
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

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import Rows

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
