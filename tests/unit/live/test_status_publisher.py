"""StatusPublisher against refusals: a missing RBAC rule is said once and backed off, not a request stream."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kubesched.framework.interfaces import Plugin
from kubesched.framework.objects import ObjectEvent, ObjectKind
from kubesched.kube.api import ApiError
from kubesched.kube.events import build_object_event
from kubesched.kube.status import FORBIDDEN_FIRST_RETRY, FORBIDDEN_MAX_RETRY, StatusPublisher

WIDGET = ObjectKind("Widget", "example.com", "v1", "widgets", namespaced=True, writes_status=True)


class WidgetStatus(Plugin):
    name = "WidgetStatus"
    object_kinds = (WIDGET,)

    def __init__(self) -> None:
        self.updates: dict[str, dict[str, dict[str, Any]]] = {}

    def status_updates(self) -> dict[str, dict[str, dict[str, Any]]]:
        out, self.updates = self.updates, {}
        return out


class RefusingApi:
    """Answers every PATCH with ``status`` (0 = success) and records the paths asked for."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[str] = []

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        self.calls.append(path)
        if self.status:
            raise ApiError(method, path, self.status, {"reason": "Forbidden", "message": "no"})
        return {}


def publisher(api: RefusingApi, plugin: WidgetStatus, clock: list[float]) -> StatusPublisher:
    return StatusPublisher(api, [plugin], [WIDGET], now=lambda: clock[0])  # type: ignore[arg-type]


def test_forbidden_is_said_once_then_backed_off_and_heals(caplog: pytest.LogCaptureFixture) -> None:
    api, plugin, clock = RefusingApi(403), WidgetStatus(), [0.0]
    pub = publisher(api, plugin, clock)
    plugin.updates = {"Widget": {f"ns/w{i}": {"phase": "Running"} for i in range(50)}}

    async def run() -> None:
        with caplog.at_level(logging.WARNING, logger="kubesched.kube.status"):
            await pub.publish_once()
            assert len(api.calls) == 1  # the other 49 of that kind wait for the back-off
            for _ in range(10):  # ten more rounds inside the back-off: no request at all
                clock[0] += 2
                await pub.publish_once()
            assert len(api.calls) == 1
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 1 and "widgets/status" in errors[0].getMessage()

            clock[0] = FORBIDDEN_FIRST_RETRY + 1  # back-off over, still forbidden: one try, doubled wait
            await pub.publish_once()
            assert len(api.calls) == 2
            clock[0] += FORBIDDEN_FIRST_RETRY + 1
            await pub.publish_once()
            assert len(api.calls) == 2  # now waiting 60 s

            api.status = 0  # the operator fixed the Role: every kept status is sent, none lost
            clock[0] += FORBIDDEN_MAX_RETRY
            await pub.publish_once()
            assert pub.patched == 50
            assert sorted(set(api.calls[2:])) == sorted(WIDGET.object_path(f"ns/w{i}", "status") for i in range(50))

    asyncio.run(run())


@pytest.mark.parametrize("status", [400, 422, 404])
def test_refused_status_is_not_resent(status: int) -> None:
    api, plugin, clock = RefusingApi(status), WidgetStatus(), [0.0]
    pub = publisher(api, plugin, clock)
    plugin.updates = {"Widget": {"ns/w": {"phase": "Bad"}}}

    async def run() -> None:
        await pub.publish_once()
        await pub.publish_once()
        assert len(api.calls) == 1

    asyncio.run(run())


def test_server_errors_are_retried_every_round() -> None:
    api, plugin, clock = RefusingApi(503), WidgetStatus(), [0.0]
    pub = publisher(api, plugin, clock)
    plugin.updates = {"Widget": {"ns/w": {"phase": "Running"}}}

    async def run() -> None:
        for _ in range(3):
            await pub.publish_once()
        assert len(api.calls) == 3

    asyncio.run(run())


def test_a_failed_patch_sent_again_keeps_its_nested_fields() -> None:
    """A map field (UnderlayIPPool status.allocations) changed in a round that failed and again in
    the next: the retry carries both rounds' entries, deletions (null) included."""
    api, plugin, clock = RefusingApi(503), WidgetStatus(), [0.0]
    pub = publisher(api, plugin, clock)
    sent: list[Any] = []

    async def request(method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        sent.append(body)
        if len(sent) == 1:
            raise ApiError(method, path, 503, {"reason": "ServiceUnavailable", "message": "busy"})
        return {}

    api.request = request  # type: ignore[method-assign]
    first = {"a": {"pod": "ns/p1"}, "b": None}
    plugin.updates = {"Widget": {"ns/w": {"allocations": first, "free": 3}}}

    async def run() -> None:
        await pub.publish_once()
        plugin.updates = {"Widget": {"ns/w": {"allocations": {"c": {"pod": "ns/p2"}}, "free": 2}}}
        await pub.publish_once()

    asyncio.run(run())
    assert sent[1] == {"status": {"allocations": {"a": {"pod": "ns/p1"}, "b": None, "c": {"pod": "ns/p2"}},
                                  "free": 2}}
    assert first == {"a": {"pod": "ns/p1"}, "b": None}  # the plugin's own dicts are not touched


class PodEvents(Plugin):
    """A plugin reporting an Event about a pod (a kind it does not declare)."""

    name = "PodEvents"

    def __init__(self) -> None:
        pass

    def object_events(self) -> list[ObjectEvent]:
        return [ObjectEvent("Pod", "ns/p", "uid-p", "BindingConditionsPending", "waiting", "Normal", "Scheduling",
                            "my-scheduler")]


def test_events_about_pods_are_posted_regarding_the_pod() -> None:
    posted: list[dict[str, Any]] = []
    pub = StatusPublisher(RefusingApi(0), [PodEvents()], [WIDGET],  # type: ignore[arg-type]
                          emit=lambda kind, ev: posted.append(build_object_event(kind, ev, "instance-1")))
    pub.publish_events()
    assert [(e["regarding"], e["metadata"]["namespace"], e["reason"], e["type"], e["reportingController"])
            for e in posted] == [({"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "uid-p"},
                                  "ns", "BindingConditionsPending", "Normal", "my-scheduler")]
