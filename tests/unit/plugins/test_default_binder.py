"""DefaultBinder."""

from __future__ import annotations

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import BindConflictError, Handle, PodGoneError
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.default_binder import DefaultBinder
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import pod_info


class FakeClient:
    def __init__(self, exc: BaseException | None = None) -> None:
        self.exc = exc
        self.calls: list[tuple[str, str]] = []

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        self.calls.append((pod.key, node_name))
        if self.exc is not None:
            raise self.exc


def binder(client: FakeClient | None) -> DefaultBinder:
    return DefaultBinder(None, Handle(NodeTable(), FakeClock(), WaitingPods(), client=client))


async def test_bind_success() -> None:
    c = FakeClient()
    st = await binder(c).bind(CycleState(), pod_info("p"), "n1")
    assert st.is_success
    assert c.calls == [("default/p", "n1")]


@pytest.mark.parametrize("exc", [BindConflictError("already bound"), PodGoneError("gone")])
async def test_conflict_and_gone_propagate(exc: Exception) -> None:
    with pytest.raises(type(exc)):
        await binder(FakeClient(exc)).bind(CycleState(), pod_info("p"), "n1")


async def test_other_errors_become_error_status() -> None:
    st = await binder(FakeClient(RuntimeError("boom"))).bind(CycleState(), pod_info("p"), "n1")
    assert st.is_error
    assert "default/p" in st.message and "n1" in st.message and "boom" in st.message


async def test_no_client_is_error() -> None:
    st = await binder(None).bind(CycleState(), pod_info("p"), "n1")
    assert st.is_error
