"""NodePorts: mirrors nodeports/node_ports_test.go TestNodePorts (same table, same results)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.node_ports import NodePorts
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod, pod_info, table_of

REASON = "node(s) didn't have free ports for the requested pod ports"


def plugin() -> NodePorts:
    return NodePorts(None, Handle(NodeTable(), FakeClock(), WaitingPods()))


def ports_pod(name: str, *infos: str, node_name: str = "") -> dict[str, Any]:
    """newPod: "PROTO/IP/PORT" strings."""
    ports = []
    for info in infos:
        proto, ip, port = info.split("/")
        ports.append({"containerPort": int(port), "hostPort": int(port), "hostIP": ip, "protocol": proto})
    raw = pod(name, node_name=node_name)
    raw["spec"]["containers"][0]["ports"] = ports
    return raw


CASES: list[tuple[str, tuple[str, ...], tuple[str, ...], bool]] = [
    ("other port", ("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/9090",), False),
    ("same udp port", ("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), True),
    ("same tcp port", ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), True),
    ("different host ip", ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.2/8080",), False),
    ("different protocol", ("UDP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), False),
    ("second udp port conflict", ("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), True),
    ("first tcp port conflict", ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
     ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"), True),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ("TCP/0.0.0.0/8001",), ("TCP/127.0.0.1/8001",), True),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP", ("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
     ("TCP/127.0.0.1/8001",), True),
    ("second tcp port conflict to 0.0.0.0 hostIP", ("TCP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), True),
    ("second different protocol", ("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), False),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", ("UDP/127.0.0.1/8001",),
     ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), True),
]


@pytest.mark.parametrize(("name", "want", "used", "conflict"), CASES, ids=[c[0] for c in CASES])
def test_node_ports(name: str, want: tuple[str, ...], used: tuple[str, ...], conflict: bool) -> None:
    t = table_of(node("m1"), pods=[ports_pod("existing", *used, node_name="m1")])
    p = PodInfo.from_raw(ports_pod("p", *want))
    pl, state = plugin(), CycleState()
    res, st = pl.pre_filter(state, p, t)
    assert res is None and st.is_success
    got = pl.filter(state, p, NodeInfo(t, 0))
    if conflict:
        assert got.code == Code.UNSCHEDULABLE and got.reasons == (REASON,)
    else:
        assert got.is_success


def test_skip_filter() -> None:
    _, st = plugin().pre_filter(CycleState(), pod_info("p"), table_of(node("n")))
    assert st.is_skip


def test_pre_filter_disabled_is_error() -> None:
    t = table_of(node("n"))
    assert plugin().filter(CycleState(), pod_info("p"), NodeInfo(t, 0)).is_error


def test_filter_batch_sparse_multi_node() -> None:
    t = table_of(
        node("a"), node("b"), node("c"), node("d"), node("e"),
        pods=[
            ports_pod("x", "TCP/0.0.0.0/80", node_name="b"),
            ports_pod("y", "TCP/10.0.0.1/443", node_name="c"),
            ports_pod("z", "UDP/0.0.0.0/53", node_name="d"),
            pod("plain", node_name="e"),
        ],
    )
    p = PodInfo.from_raw(ports_pod("p", "TCP/10.0.0.1/80", "TCP/10.0.0.2/443"))
    pl, state = plugin(), CycleState()
    pl.pre_filter(state, p, t)
    v = pl.filter_batch(state, p, t, t.alive_rows())
    assert v.passed().tolist() == [True, False, True, True, True]
    assert v.statuses[0].code == Code.UNSCHEDULABLE
    # freeing the port makes the node fit again
    t.remove_pod(next(iter(t.pods[t.index["b"]])))
    assert pl.filter_batch(state, p, t, t.alive_rows()).passed().tolist() == [True] * 5
