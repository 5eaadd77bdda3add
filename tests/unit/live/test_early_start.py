"""`kubesched run` starts its backlog informers before it decodes its configuration (issue 32 item 2):
the kubeconfig read ahead is the one the run would use, and a large list is handed on in order
while other tasks on the event loop keep running."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from kubesched.kube.informer import Handlers, Informer
from kubesched.live.early import PreparedPods, backlog_informers, kubeconfig_hint
from kubesched.snapshot.pod import PodInfo, PodSpecError


def test_the_flag_wins_over_the_configuration_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("clientConnection:\n  kubeconfig: /from/file\n")
    assert kubeconfig_hint(cfg, "/from/flag") == "/from/flag"
    assert kubeconfig_hint(cfg, None) == "/from/file"


def test_no_kubeconfig_named_means_the_loaders_defaults(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert kubeconfig_hint(cfg, None) is None
    assert kubeconfig_hint(None, None) is None
    cfg.write_text("clientConnection:\n  kubeconfig: ''\n")
    assert kubeconfig_hint(cfg, None) is None


@pytest.mark.parametrize("text", ["clientConnection:\n  kubeconfig: [a]\n", "a: [\n", "--- {}\n--- {}\n"])
def test_a_file_that_cannot_tell_starts_nothing_early(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    with pytest.raises(ValueError):
        kubeconfig_hint(cfg, None)
    with pytest.raises(ValueError):
        kubeconfig_hint(tmp_path / "missing.yaml", None)


def _pod(i: int) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}",
                                                            "resourceVersion": str(i)}, "spec": {}}


async def test_a_large_list_is_handed_on_in_order_while_other_tasks_run() -> None:
    seen: list[str] = []
    inf = Informer(None, "/api/v1/pods", Handlers(lambda o: seen.append(o["metadata"]["name"])))  # type: ignore[arg-type]
    items = [_pod(i) for i in range(2000)]
    order = [o["metadata"]["name"] for o in items]
    seen_by_other: list[int] = []

    async def other() -> None:  # another informer's request, say: it runs between chunks
        while len(seen) < 2000:
            seen_by_other.append(len(seen))
            await asyncio.sleep(0)

    other_task = asyncio.ensure_future(other())
    await inf._replace(items, "9")
    await other_task
    assert seen == order and len(inf.store) == 2000 and inf.resource_version == "9"
    assert any(0 < n < 2000 for n in seen_by_other)


def test_prepared_pods_hand_back_the_parse_of_the_very_object_parsed() -> None:
    prepared = PreparedPods()
    raw = _pod(1) | {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}
    prepared.prepare(raw)
    equal_copy = copy.deepcopy(raw)
    assert prepared.take(equal_copy) is None  # another object (a later version, say): parsed anew
    pod = prepared.take(raw)
    assert isinstance(pod, PodInfo) and pod.key == "ns/p1" and pod.raw is raw
    assert pod.requests == PodInfo.from_raw(equal_copy).requests
    assert prepared.take(raw) is None  # taken once


def test_a_pod_that_does_not_parse_keeps_its_error_for_the_handler() -> None:
    prepared = PreparedPods()
    raw = _pod(2) | {"spec": {"priority": "high"}}
    prepared.prepare(raw)
    with pytest.raises(PodSpecError, match=r"spec\.priority must be an integer"):
        prepared.take(raw)
    assert prepared.take(raw) is None  # taken once


def test_after_the_first_sync_nothing_is_parsed_ahead() -> None:
    prepared = PreparedPods()
    left = _pod(3)
    prepared.prepare(left)  # from a list whose stream broke: never taken
    prepared.close()
    assert prepared.take(left) is None
    later = _pod(4)
    prepared.prepare(later)
    assert prepared.take(later) is None


def test_a_pod_whose_parse_fails_otherwise_is_left_to_the_handler() -> None:
    prepared = PreparedPods()
    raw = _pod(5) | {"spec": {"containers": [{"name": "c", "ports": [80]}]}}  # not objects: not a PodSpecError
    with pytest.raises(Exception) as failure:
        PodInfo.from_raw(raw)
    assert not isinstance(failure.value, PodSpecError)
    prepared.prepare(raw)  # kept nothing, raised nothing: the add handler parses it and reports it once
    assert prepared.take(raw) is None


def test_the_pods_informer_lists_only_unfinished_pods_like_kube_scheduler() -> None:
    # pkg/scheduler/scheduler.go newPodInformer: finished Job pods are neither listed nor kept.
    nodes, pods = backlog_informers(None, 30.0)  # type: ignore[arg-type]
    assert pods.params.get("fieldSelector") == "status.phase!=Succeeded,status.phase!=Failed"
    assert "fieldSelector" not in nodes.params
