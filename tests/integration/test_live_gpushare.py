"""GpuShare in ``kubesched run`` on the real control plane: pods asking for shares of GPUs
(``alibabacloud.com/gpu-milli``) on KWOK nodes with ``alibabacloud.com/gpu-count`` capacity get
the GPUs chosen for them written to the live pod's ``alibabacloud.com/gpu-index`` (PreBind,
through the live client's merge patch), so a device plugin can honour them; under a burst no GPU
is given more than 1000 milli."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_live_scheduler import InProcess, bound_count, create_pods, pods_in, settled_bound_count

pytestmark = pytest.mark.integration
GPU_COUNT = "alibabacloud.com/gpu-count"
GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_MODEL = "alibabacloud.com/gpu-card-model"
GPU_INDEX = "alibabacloud.com/gpu-index"


def test_a_burst_of_gpu_share_pods_gets_gpu_index_annotations_that_never_overcommit(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    name = f"gpu-{ns}"
    cfg = tmp_path / "gpushare.json"
    cfg.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 200, "burst": 400},
        "percentageOfNodesToScore": 100,
        "profiles": [{
            "schedulerName": name,
            "plugins": {"multiPoint": {"enabled": [{"name": "GpuShare"}, {"name": "FGD", "weight": 1000}]},
                        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "FGD", "weight": 1000}]}},
            "pluginConfig": [{"name": "GpuShare", "args": {"gpuSelMethod": "FGD"}}],
        }],
    }))
    group = {"kubesched.test/group": ns}
    nodes = cp.create_nodes(2, prefix=f"{ns}-g", cpu="64", memory="256Gi",
                            extended={GPU_COUNT: "2", GPU_MILLI: "2000"}, labels={**group, GPU_MODEL: "T4"})
    nodes_to_delete += nodes
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        # 4 GPUs of 1000 milli: 3 pods of 300 fit on each, so 12 of the 14 are bound.
        names = [f"share-{i}" for i in range(14)]
        create_pods(cp, ns, names, scheduler_name=name, requests={"cpu": "100m"},
                    annotations={GPU_MILLI: "300", GPU_COUNT: "1"})
        cp.wait_for(lambda: bound_count(cp, ns) >= 12, 60, 0.25, "12 GPU-share pods bound")
        assert settled_bound_count(cp, ns) == 12
        used: dict[tuple[str, int], int] = defaultdict(int)
        for p in pods_in(cp, ns):
            node = p["spec"].get("nodeName")
            if not node:
                continue
            index = (p["metadata"].get("annotations") or {}).get(GPU_INDEX)
            assert index in ("0", "1"), (p["metadata"]["name"], index)
            used[(node, int(index))] += 300
        assert set(used.values()) == {900}, dict(used)
        assert {node for node, _ in used} == set(nodes)
    finally:
        assert sched.stop() == 0
