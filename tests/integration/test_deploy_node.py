"""The kubesched image (deploy/image/build.sh) as a pod on a real node: containerd + the kubelet
built from the pinned module (kubesched.testing.controlplane.node), no mock in between."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import kubesched
from kubesched.app.version import KUBERNETES_RELEASE
from kubesched.testing.controlplane.node import RealNode

pytestmark = pytest.mark.integration

IMAGE = f"kubesched:{kubesched.__version__}"


@pytest.fixture(scope="module")
def node_with_image(real_node: RealNode, kubesched_image: Path) -> RealNode:
    # `image: kubesched:0.1.0` resolves to docker.io/library/kubesched:0.1.0, as with a registry.
    real_node.import_image(kubesched_image / "kubesched-image.tar", base_name="docker.io/library/kubesched")
    return real_node


def _namespace(node: RealNode) -> str:
    name = f"node-{uuid.uuid4().hex[:6]}"
    node.cluster.create_namespace(name)
    # ServiceAccount admission (on for real nodes) refuses pods until the `default` account exists.
    node.cluster.wait_for(lambda: node.cluster.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                          60, 0.2, "default ServiceAccount")
    return name


def _phase(node: RealNode, ns: str, name: str) -> Any:
    pod = node.cluster.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return pod["status"].get("phase")


def test_the_image_runs_to_completion_on_the_real_node(node_with_image: RealNode) -> None:
    node = node_with_image
    ns = _namespace(node)
    node.cluster.api("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "version"},
        "spec": {
            "nodeName": node.name,
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "kubesched", "image": IMAGE, "args": ["version"],
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
        },
    })
    phase = node.cluster.wait_for(lambda: _phase(node, ns, "version") in ("Succeeded", "Failed")
                                  and _phase(node, ns, "version"), 120, 0.5, "pod finished")
    # `kubectl logs`: API server → kubelet at the node's InternalIP with its client certificate.
    log = node.cluster.get(f"/api/v1/namespaces/{ns}/pods/version/log")
    assert phase == "Succeeded", log
    assert log.startswith(f"kubesched {kubesched.__version__}\nKubernetes {KUBERNETES_RELEASE}")
