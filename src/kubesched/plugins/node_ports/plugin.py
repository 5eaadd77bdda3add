"""NodePorts: a pod's host ports must be free on the node.

Port of pkg/scheduler/framework/plugins/nodeports/node_ports.go and HostPortInfo.CheckConflict
(pkg/scheduler/framework/types.go): a wanted (ip, protocol, port) conflicts with a used one on the
same protocol and port when either IP is 0.0.0.0 or the IPs are equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.snapshot.pod import HostPort, PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "NodePorts"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
#: ErrReason
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    want_ports: tuple[HostPort, ...]

    def clone(self) -> _PreFilterState:
        return self


def _sanitize(hp: HostPort) -> tuple[str, str, int]:
    return hp.ip or DEFAULT_BIND_ALL_HOST_IP, hp.protocol or "TCP", hp.port


def check_conflict(used: Iterable[HostPort], want: HostPort) -> bool:
    """HostPortInfo.CheckConflict of one wanted port against the ports in use on a node."""
    ip, proto, port = _sanitize(want)
    if port <= 0:
        return False
    for u in used:
        uip, uproto, uport = _sanitize(u)
        if uport == port and uproto == proto and (
            ip == DEFAULT_BIND_ALL_HOST_IP or uip in (DEFAULT_BIND_ALL_HOST_IP, ip)
        ):
            return True
    return False


def fits_ports(want_ports: Sequence[HostPort], used: Mapping[HostPort, int]) -> bool:
    """fitsPorts: no wanted port conflicts with the node's used ports."""
    if not used:
        return True
    return not any(check_conflict(used, w) for w in want_ports)


class NodePorts(PreFilterPlugin, FilterPlugin):
    name: ClassVar[str] = NAME

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (node_ports.go): the pod's host ports."""
        return ((signers.HOST_PORTS, signers.host_ports_signer(pod)),)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream (queueing hints on): an assigned pod deleted (its ports are freed; pod ports are
        # immutable so updates are ignored) and Node/Add.
        return (
            ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),
            ClusterEvent(NODE, ActionType.ADD, "NodeAdd"),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(pod.host_ports))
        return None, SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            # Upstream: Filter without PreFilter state is an error (TestPreFilterDisabled).
            return Verdicts(np.ones(len(rows), dtype=np.int32),
                            [Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')])
        ok = np.ones(len(rows), dtype=np.bool_)
        used_ports = table.used_ports
        # Sparse: only rows with any port in use can conflict.
        with_ports = table.has_used_ports.take(rows).nonzero()[0]
        for i, row in zip(with_ports.tolist(), rows.take(with_ports).tolist(), strict=True):
            if not fits_ports(s.want_ports, used_ports[row]):
                ok[i] = False
        return Verdicts.from_mask(ok, Status.unschedulable(ERR_REASON))
