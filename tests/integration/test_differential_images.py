"""ImageLocality, differential: KWOK nodes reporting ``status.images`` and pods of several images,
scheduled by the real kube-scheduler (the oracle, same release) and by `kubesched run` with its
default profile, one after the other on the same nodes; then kubesched's cluster, dumped as
`kubectl get nodes,pods -o yaml` would (the pods unbound), replayed by the simulator.

Every node has the same capacity (1000 CPUs, 4000Gi) and the pods request nothing, so
NodeResourcesFit scores every node 99 and the plugins that score from pods or taints skip or tie:
ImageLocality decides. One node carries a ballast pod (15 CPUs): it scores 98 there, which breaks
ImageLocality's own ties (both sums clamped) the way upstream's clamping says. Most pods are
confined to two nodes (required node affinity on ``metadata.name``), so each is one rule:

==========  ==========================================================  ======  ====================
pod         images (init containers, containers, image volumes)         winner  why
==========  ==========================================================  ======  ====================
spread      rare (1900 MiB, 1 node) + base (1200 MiB, 6 nodes)          n1      size × share of
                                                                                nodes: base beats
                                                                                the bigger rare one
                                                                                (unscaled: n0)
tag         ``img.test/tools`` (no tag)                                 n2      matches
                                                                                ``...:latest``, not
                                                                                the untagged name
port        ``registry.test:5000/agent`` (a port, no tag)               n4      ``:latest`` added
                                                                                after the port
init        init setup (4000) + app (1500)                              n0      init containers
                                                                                count
repeat      sidecar twice (2500 each) + worker (3000)                   n3      summed per container
volume      app (1500) + image volume data (4000)                       n5      image volumes count
huge        model (200 GiB, 2 nodes) + extra (600)                      n4      both sums above
                                                                                2×1000 MiB: 100 on
                                                                                both, the ballast
                                                                                decides
small       busybox-small (20 MiB, ballast node only)                   n1      below 23 MiB: 0
mixed-a     init setup + base + tools, any node                         n2
mixed-b     init setup + rare + worker, any node                        n0
==========  ==========================================================  ======  ====================

The share of nodes is taken over every node of the cluster, other tests' included: the tables
below were checked with upstream's formulas to give each pod a unique winner (by at least one
point) in any cluster of 7 to 93 nodes, and the test refuses a larger one.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.app.startup import load_scheduler_config
from kubesched.framework.registry import profiles_object_kinds
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.testing.controlplane import ControlPlane

from .test_differential_spread import run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
#: The scenario's winners stay unique up to this many nodes in the cluster (see the docstring).
MAX_CLUSTER_NODES = 93
BALLAST_NODE = "n6"


def _image(name: str, mib: int) -> dict[str, Any]:
    """A ``status.images`` entry as a kubelet reports it: the tag and a digest name."""
    repo = name.rsplit(":", 1)[0] if name.rfind(":") > name.rfind("/") else name
    digest = f"{repo}@sha256:{hashlib.sha256(name.encode()).hexdigest()}"
    return {"names": [digest, name], "sizeBytes": mib * MiB}


#: Node role → the images it reports (name → MiB).
NODE_IMAGES: dict[str, dict[str, int]] = {
    "n0": {"img.test/rare:latest": 1900, "img.test/setup:1.0": 4000},
    "n1": {"img.test/base:latest": 1200},
    "n2": {"img.test/base:latest": 1200, "img.test/tools:latest": 4000, "img.test/app:1.0": 1500},
    # An untagged name (kubelets never report one, a pod's "img.test/tools" must not match it).
    "n3": {"img.test/base:latest": 1200, "img.test/tools": 4000, "img.test/tools:v2": 4000,
           "img.test/sidecar:2": 2500},
    "n4": {"img.test/base:latest": 1200, "registry.test:5000/agent:latest": 4000, "img.test/model:big": 204800},
    "n5": {"img.test/base:latest": 1200, "registry.test:5000/agent": 4000, "img.test/worker:3": 3000,
           "img.test/data:v1": 4000},
    "n6": {"img.test/base:latest": 1200, "img.test/model:big": 204800, "img.test/extra:1": 600,
           "img.test/busybox-small:1": 20},
}

#: Pod → (init container images, container images, image volume references, candidate node roles
#: or None for every node of the test, the node role that must win).
PODS: dict[str, tuple[list[str], list[str], list[str], list[str] | None, str]] = {
    "spread": ([], ["img.test/rare", "img.test/base"], [], ["n0", "n1"], "n1"),
    "tag": ([], ["img.test/tools"], [], ["n2", "n3"], "n2"),
    "port": ([], ["registry.test:5000/agent"], [], ["n4", "n5"], "n4"),
    "init": (["img.test/setup:1.0"], ["img.test/app:1.0"], [], ["n0", "n2"], "n0"),
    "repeat": ([], ["img.test/sidecar:2", "img.test/sidecar:2", "img.test/worker:3"], [], ["n3", "n5"], "n3"),
    "volume": ([], ["img.test/app:1.0"], ["img.test/data:v1"], ["n2", "n5"], "n5"),
    "huge": ([], ["img.test/model:big", "img.test/extra:1"], [], ["n6", "n4"], "n4"),
    "small": ([], ["img.test/busybox-small:1"], [], ["n6", "n1"], "n1"),
    "mixed-a": (["img.test/setup:1.0"], ["img.test/base", "img.test/tools"], [], None, "n2"),
    "mixed-b": (["img.test/setup:1.0"], ["img.test/rare", "img.test/worker:3"], [], None, "n0"),
}
EXPECTED = {pod: winner for pod, (*_, winner) in PODS.items()}


def _nodes(cp: ControlPlane, ns: str, cleanup: list[str]) -> dict[str, str]:
    """The seven nodes, each with its images; node name → role."""
    role_of = {}
    for role, images in NODE_IMAGES.items():
        name = cp.create_nodes(1, prefix=f"{ns}-n", start=int(role[1:]), cpu="1000", memory="4000Gi",
                               labels={"kubesched.test/group": ns},
                               images=[_image(n, mib) for n, mib in images.items()], wait_ready=False)[0]
        cleanup.append(name)
        role_of[name] = role
    cp.wait_for(lambda: set(role_of) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    return role_of


def _pod_spec(init: list[str], containers: list[str], volumes: list[str],
              candidates: list[str] | None, node_of_role: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "initContainers": [{"name": f"init-{i}", "image": img} for i, img in enumerate(init)],
        "containers": [{"name": f"c-{i}", "image": img} for i, img in enumerate(containers)],
        "volumes": [{"name": f"v-{i}", "image": {"reference": ref, "pullPolicy": "IfNotPresent"}}
                    for i, ref in enumerate(volumes)],
    }
    if candidates:
        # One term per node (terms are ORed; a metadata.name field selector takes one value).
        terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_of_role[r]]}]}
                 for r in candidates]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return spec


def _scenario(cp: ControlPlane, ns: str, role_of: dict[str, str], scheduler: str) -> dict[str, str]:
    """The ballast pod (bound by name), then every pod of PODS; pod → role of the node it bound to."""
    node_of_role = {role: name for name, role in role_of.items()}
    cp.create_pod("ballast", ns, node_name=node_of_role[BALLAST_NODE], requests={"cpu": "15"})
    cp.wait_for(lambda: bool(pods_in(cp, ns)), 10, 0.1, "ballast pod")
    time.sleep(1.0)  # the schedulers' caches hold it before any pod of the scenario arrives
    for pod, (init, containers, volumes, candidates, _) in PODS.items():
        cp.create_pod(pod, ns, scheduler_name=scheduler, node_selector={"kubesched.test/group": ns},
                      extra_spec=_pod_spec(init, containers, volumes, candidates, node_of_role))

    def all_bound() -> list[dict[str, Any]] | None:
        pods = [p for p in pods_in(cp, ns) if p["metadata"]["name"] in PODS]
        return pods if len(pods) == len(PODS) and all(p["spec"].get("nodeName") for p in pods) else None

    try:
        pods = cp.wait_for(all_bound, 90, 0.3, "every pod bound")
    except TimeoutError as e:
        state = {p["metadata"]["name"]: (p["spec"].get("nodeName"), p.get("status", {}).get("conditions"))
                 for p in pods_in(cp, ns)}
        raise AssertionError(f"{e}\npods: {state}") from e
    return {p["metadata"]["name"]: role_of[p["spec"]["nodeName"]] for p in pods}


def _dump(cp: ControlPlane, ns: str, path: Path) -> None:
    """`kubectl get nodes,pods -o yaml` of every node (the share of nodes is over all of them) and
    the test's pods; the scheduled ones unbound again (no nodeName, no status, the default
    scheduler), the ballast pod kept on its node."""
    items: list[dict[str, Any]] = [{**n, "apiVersion": "v1", "kind": "Node"} for n in cp.get("/api/v1/nodes")["items"]
                                   if not n["metadata"].get("deletionTimestamp")]
    for pod in pods_in(cp, ns):
        if pod["metadata"]["name"] in PODS:
            pod["spec"].pop("nodeName", None)
            pod["spec"].pop("schedulerName", None)
            pod.pop("status", None)
        items.append({**pod, "apiVersion": "v1", "kind": "Pod"})
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


def test_image_locality_matches_kube_scheduler_and_replays_in_the_simulator(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    role_of = _nodes(cp, ns, nodes_to_delete)

    # The images stay on the nodes KWOK manages (its stages patch the status without them).
    for name, role in role_of.items():
        reported = cp.get(f"/api/v1/nodes/{name}")["status"].get("images")
        assert reported == [_image(n, mib) for n, mib in NODE_IMAGES[role].items()], name
    total = len(cp.get("/api/v1/nodes")["items"])
    if total > MAX_CLUSTER_NODES:
        pytest.fail(f"the cluster has {total} nodes (other tests' included); this scenario's winners are "
                    f"unique for at most {MAX_CLUSTER_NODES}: delete leftover nodes", pytrace=False)

    oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig, lambda name: _scenario(cp, ns, role_of, name))
    print(f"\n[differential-images] {total} nodes\n[differential-images] kube-scheduler: {oracle}"
          f"\n[differential-images] kubesched:      {ours}")
    assert oracle == EXPECTED, "the oracle disagrees with the design: the scenario no longer tests what it says"
    assert ours == oracle

    # kubesched's cluster as a dump, the pods unbound again: the simulator places them the same way.
    dump = tmp_path / "dump.yaml"
    _dump(cp, ns, dump)
    config, registry = load_scheduler_config(None)
    cluster = load_cluster(dump, profiles_object_kinds(registry, config.profiles))
    result = asyncio.run(Simulation(config, registry, cluster).run())
    replayed = {r.key.split("/", 1)[1]: role_of.get(r.node or "", r.node) for r in result.records.values()}
    assert {p: replayed.get(p) for p in PODS} == ours
