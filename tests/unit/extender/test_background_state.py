"""Plugins with background state (RealUsage's Prometheus cache) behave the same in the extender,
which builds one framework per node table it serves but starts only the first."""

from __future__ import annotations

import orjson

from kubesched.config.load import load_config
from kubesched.extender.requests import Deadline
from kubesched.extender.service import ExtenderService
from kubesched.plugins.builtin import builtin_registry
from kubesched.testing import node, pod

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "real-usage",
            "plugins": {
                "multiPoint": {"enabled": [{"name": "MemRealUsage"}]},
                "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "MemRealUsage"}]},
            },
            "pluginConfig": [{"name": "MemRealUsage", "args": {"prometheusApiAddr": "http://127.0.0.1:9"}}],
        }
    ],
}


def test_per_request_frameworks_score_from_the_started_plugins_metrics() -> None:
    registry = builtin_registry()
    profile = load_config(CONFIG, registry).profiles[0]
    service = ExtenderService(profile, registry)
    # What the started (primary) plugin's poller would have fetched: node "hot" at 95 % memory.
    started = service._primary.plugins["MemRealUsage"]
    started.cache.update("memory", {"hot": 0.95, "cool": 0.10})  # type: ignore[attr-defined]

    body = {"Pod": pod("p", cpu="100m"), "Nodes": {"items": [node("hot"), node("cool")]}}
    reply = service.prioritize(body, Deadline("prioritize", 3.0))
    assert reply.status == 200
    scores = {h["Host"]: h["Score"] for h in orjson.loads(reply.body)}
    assert scores["cool"] > scores["hot"]
