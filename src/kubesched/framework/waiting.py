"""Pods held at Permit (upstream framework/runtime/waiting_pods_map.go).

A WaitingPod waits for every plugin that returned Wait to allow it. Any plugin may allow or reject
it by uid; a plugin's wait times out at its own deadline, checked by ``expire(now)`` against the
injected clock so the simulator can run Permit timeouts in virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.snapshot.pod import PodInfo

#: Upstream caps a Permit wait at 15 minutes (framework.go maxTimeout).
MAX_PERMIT_TIMEOUT = 15 * 60.0


class WaitingPod:
    __slots__ = ("_future", "_result", "deadlines", "node_name", "pod", "waits")

    def __init__(self, pod: PodInfo, node_name: str, waits: dict[str, float], now: float) -> None:
        self.pod = pod
        self.node_name = node_name
        #: Plugin name → absolute deadline (clock seconds) of its wait.
        self.deadlines = {name: now + min(t, MAX_PERMIT_TIMEOUT) for name, t in waits.items()}
        #: Plugin name → its wait (capped), kept for the timeout message.
        self.waits = {name: min(t, MAX_PERMIT_TIMEOUT) for name, t in waits.items()}
        self._result: Status | None = None
        self._future: asyncio.Future[Status] | None = None

    @property
    def pending_plugins(self) -> list[str]:
        return sorted(self.deadlines)

    @property
    def decided(self) -> bool:
        return self._result is not None

    def allow(self, plugin: str) -> None:
        """The named plugin lets the pod go; it binds once no plugin is pending."""
        if self._result is not None:
            return
        self.deadlines.pop(plugin, None)
        if not self.deadlines:
            self._decide(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        if self._result is None:
            self._decide(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def _decide(self, status: Status) -> None:
        self._result = status
        if self._future is not None and not self._future.done():
            self._future.set_result(status)

    async def wait(self) -> Status:
        if self._result is not None:
            return self._result
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return await self._future

    def next_deadline(self) -> float | None:
        return min(self.deadlines.values()) if self.deadlines and self._result is None else None


class WaitingPods:
    """All pods waiting at Permit, by uid."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, wp: WaitingPod) -> None:
        self._pods[wp.pod.uid] = wp

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        wp = self._pods.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    def expire(self, now: float) -> None:
        """Reject every wait whose deadline has passed, with upstream's timeout message."""
        for wp in list(self._pods.values()):
            # The wait that ran out first is the one to blame (ties: by plugin name).
            for plugin, deadline in sorted(wp.deadlines.items(), key=lambda kv: (kv[1], kv[0])):
                if deadline <= now and not wp.decided:
                    waited = _fmt(wp.waits[plugin])
                    wp.reject(plugin, f"rejected due to timeout after waiting {waited} at plugin {plugin}")

    def next_deadline(self) -> float | None:
        deadlines = [d for wp in self._pods.values() if (d := wp.next_deadline()) is not None]
        return min(deadlines) if deadlines else None


def _fmt(seconds: float) -> str:
    """Go's time.Duration String() for whole and fractional seconds (e.g. 10s, 1.5s, 1m0s)."""
    if seconds >= 60:
        m, s = divmod(seconds, 60)
        return f"{int(m)}m{s:g}s"
    return f"{seconds:g}s"
