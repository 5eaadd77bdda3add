"""Helpers for the extender's unit tests: a profile, a fake cluster, an in-process server."""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kubesched.backend.cache import SchedulerCache
from kubesched.config.load import load_config_text
from kubesched.extender.server import ExtenderServer
from kubesched.extender.service import ExtenderService
from kubesched.framework.registry import Registry
from kubesched.snapshot.pod import PodInfo

#: UnderlayIP as the only score plugin (the reference ip-scheduler), default filters.
IP_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: ip
    plugins:
      multiPoint:
        enabled:
          - name: UnderlayIP
      score:
        disabled:
          - name: "*"
        enabled:
          - name: UnderlayIP
    pluginConfig:
      - name: UnderlayIP
        args:
          ipsPerNode: 10
          podSelector:
            matchLabels:
              app: ip
"""


class FakeCluster:
    """A ClusterView without a cluster: a cache the test fills, binds recorded."""

    def __init__(self, nodes: list[dict[str, Any]] = (), pods: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
        self._cache = SchedulerCache()
        self.objects_by_kind: dict[str, dict[str, dict[str, Any]]] = {}
        for n in nodes:
            self._cache.add_or_update_node(n)
        for p in pods:
            self._cache.add_or_update_pod(PodInfo.from_raw(p))
        self.synced_flag = True
        self.bound: list[tuple[str, str, str, str]] = []
        self.fail_bind: str | None = None
        #: uid → the annotations each successful bind sent on its Binding.
        self.binding_annotations: dict[str, dict[str, str]] = {}
        #: ClusterView.changes: a test that edits objects_by_kind between a pod's filter and
        #: prioritize bumps it (the node table's generation covers the cache).
        self.changes = 0
        self.pending_changes = 0

    @property
    def cache(self) -> SchedulerCache:
        return self._cache

    @property
    def synced(self) -> bool:
        return self.synced_flag

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.objects_by_kind.get(kind, {})

    def pending_pods(self) -> Iterator[PodInfo]:
        return iter(())

    def pending_pod(self, uid: str) -> PodInfo | None:
        return None

    def next_pending(self, skip: Container[str], limit: int = 64) -> PodInfo | None:
        return None

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None = None
    ) -> None:
        if self.fail_bind:
            raise RuntimeError(self.fail_bind)
        self.bound.append((namespace, name, uid, node))
        self.binding_annotations[uid] = dict(annotations or {})


def ip_profile(registry: Registry, text: str = IP_CONFIG) -> Any:
    return load_config_text(text, registry).profiles[0]


async def make_client(service: ExtenderService, **kwargs: Any) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(ExtenderServer(service, **kwargs).app()))
    await client.start_server()
    return client
