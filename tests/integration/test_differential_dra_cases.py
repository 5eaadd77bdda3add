"""DynamicResources, differential, case by case: each DRA feature on a small cluster of KWOK nodes,
scheduled by the real kube-scheduler v1.37 (the oracle) then by `kubesched run`, one after the other
(``run_both``), with kube-controller-manager running (it stamps claims from ResourceClaimTemplates).

Cases (each pod's node is forced by what fits, wave after wave, so the outcome does not hang on a
random tie): claims from templates; a prioritized list (``firstAvailable``: the first subrequest
where it fits, the second elsewhere); consumable capacity (one device of ``allowMultipleAllocations``
shared by claims asking for capacity, a ``validRange`` request policy rounding a request up); CEL
selectors on string, int, bool, version attributes and on capacity, a ``matchAttribute`` constraint,
a selector failing at run time; device taints in the slices (NoSchedule, NoExecute) and tolerations
(Equal, Exists, a wrong value, none); an extended resource a DeviceClass maps (the scheduler makes
each pod's claim).

Compared, kube-scheduler against kubesched: for every pod, its node and each claim's allocation
(request or subrequest, node of the pool, device, consumed capacity, tolerations), pending pods'
PodScheduled messages word for word; both must allocate every bound pod's claim on its node and
reserve it for the pod; and from a watch of every ResourceClaim event of each run, no device held by
two claims at any moment except as shares within the device's capacity. kube-scheduler's outcome is
also held to the expected one (the node of each pod), so a case that stops exercising what it names
fails instead of passing trivially.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .dra_harness import GROUP, CasePod, DraCase, watched
from .test_differential_spread import run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

DRIVER = "dra.example.com"


# -- object builders ---------------------------------------------------------------------------------


def device(name: str, attributes: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    """A device; attribute values typed by Python type (str -> string, bool, int, "v:1.2.3" -> version)."""
    def typed(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"bool": v}
        if isinstance(v, int):
            return {"int": v}
        return {"version": v[2:]} if v.startswith("v:") else {"string": v}

    out: dict[str, Any] = {"name": name, **extra}
    if attributes:
        out["attributes"] = {k: typed(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: v if isinstance(v, dict) else {"value": v} for k, v in capacity.items()}
    return out


def slice_(ns: str, node: str, devices: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    return ("resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                               "metadata": {"name": f"{node}-{DRIVER}"},
                               "spec": {"driver": DRIVER, "nodeName": node,
                                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                        "devices": devices}})


def device_class(ns: str) -> tuple[str, dict[str, Any]]:
    return ("deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                              "metadata": {"name": f"{ns}-gpu"},
                              "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})


def exactly(ns: str, *selectors: str, count: int = 1, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": f"{ns}-gpu", "allocationMode": "ExactCount", "count": count, **extra}
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return out


def claim_spec(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def claim(ns: str, name: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                               "metadata": {"name": name, "namespace": ns}, "spec": spec})


def template(ns: str, name: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("resourceclaimtemplates", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                       "metadata": {"name": name, "namespace": ns}, "spec": {"spec": spec}})


def one(ns: str, run: str, pods: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """A claim per pod, named ``<run>-<pod>``, with one request ``gpu``."""
    return [claim(ns, f"{run}-{pod}", claim_spec([{"name": "gpu", "exactly": req}])) for pod, req in pods.items()]


def attr(name: str) -> str:
    return f'device.attributes["{DRIVER}"].{name}'


def own(name: str, wave: int, node: int) -> CasePod:
    """A pod with its own claim (``<run>-<name>``) as pod claim ``gpu``."""
    return CasePod(name, {"gpu": ("claim", name)}, wave, node)


# -- the cases ---------------------------------------------------------------------------------------


def _templates() -> DraCase:
    """Node 1 has two GPUs, node 2 one: the pod asking for two from a template can only go to node 1,
    then one from the other template only to node 2; the rest find no GPU."""
    gpus = [device("gpu-0"), device("gpu-1")]
    return DraCase(
        "templates", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], gpus), slice_(ns, nodes[1], gpus[:1]), device_class(ns)],
        lambda ns, run: [template(ns, f"{run}-two", claim_spec([{"name": "gpu", "exactly": exactly(ns, count=2)}])),
                         template(ns, f"{run}-one", claim_spec([{"name": "gpu", "exactly": exactly(ns)}]))],
        [CasePod("pair", {"gpu": ("template", "two")}, 1, 1),
         CasePod("single", {"gpu": ("template", "one")}, 2, 2),
         CasePod("single-late", {"gpu": ("template", "one")}, 3, 0),
         CasePod("two-claims", {"a": ("template", "one"), "b": ("template", "one")}, 3, 0)])


def _prioritized_list() -> DraCase:
    """``firstAvailable``: an A100, else two T4s. Node 1 has the A100 (Score prefers the first
    subrequest), node 2 two T4s (the second pod's only choice), the third pod finds neither."""
    def first_available(ns: str) -> dict[str, Any]:
        big = {"name": "big", "deviceClassName": f"{ns}-gpu", "selectors": [{"cel": {"expression":
               f'{attr("model")} == "A100"'}}]}
        small = {"name": "small", "deviceClassName": f"{ns}-gpu", "allocationMode": "ExactCount", "count": 2,
                 "selectors": [{"cel": {"expression": f'{attr("model")} == "T4"'}}]}
        return {"name": "gpu", "firstAvailable": [big, small]}

    return DraCase(
        "prioritized", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], [device("gpu-0", {"model": "A100"})]),
                           slice_(ns, nodes[1], [device("gpu-0", {"model": "T4"}), device("gpu-1", {"model": "T4"})]),
                           device_class(ns)],
        lambda ns, run: [claim(ns, f"{run}-{p}", claim_spec([first_available(ns)])) for p in ("fa-0", "fa-1", "fa-2")],
        [own("fa-0", 1, 1), own("fa-1", 2, 2), own("fa-2", 3, 0)])


def _consumable_capacity() -> DraCase:
    """One GPU of 8Gi with ``allowMultipleAllocations``, a ``validRange`` policy (min 1Gi, step 1Gi):
    3Gi + 3Gi + 1500Mi (rounded up to 2Gi) fill it; one more 1Gi does not fit; a claim with no
    capacity request takes the policy's default (4Gi) and does not fit either; the plain GPU of node 2
    goes to the claim asking for a whole device."""
    policy = {"value": "8Gi", "requestPolicy": {"default": "4Gi",
                                                "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}}}
    shared = device("shared-0", {"model": "A100"}, {"memory": policy}, allowMultipleAllocations=True)

    def share(ns: str, memory: str | None) -> dict[str, Any]:
        req = exactly(ns, f'{attr("model")} == "A100"')
        if memory:
            req["capacity"] = {"requests": {"memory": memory}}
        return req

    asks = {"cc-a": "3Gi", "cc-b": "3Gi", "cc-c": "1500Mi", "cc-d": "1Gi", "cc-default": None}
    return DraCase(
        "capacity", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], [shared]), slice_(ns, nodes[1], [device("gpu-0", {"model": "L4"})]),
                           device_class(ns)],
        lambda ns, run: one(ns, run, {**{p: share(ns, m) for p, m in asks.items()},
                                      "whole": exactly(ns, f'{attr("model")} == "L4"')}),
        [own("cc-a", 1, 1), own("cc-b", 1, 1), own("whole", 1, 2), own("cc-c", 2, 1),
         own("cc-d", 3, 0), own("cc-default", 3, 0)])


def _selectors() -> DraCase:
    """Selectors on a bool, a version (``semver``, ``isGreaterThan``), capacity (``compareTo``), an
    int and a string; two devices with one ``matchAttribute``; nothing has 50Gi; a selector reading
    an attribute no device has fails at run time."""
    node1 = [device("gpu-0", {"model": "A100", "index": 0, "healthy": True, "driverVersion": "v:1.3.0"},
                    {"memory": "40Gi"}),
             device("gpu-1", {"model": "A100", "index": 1, "healthy": False, "driverVersion": "v:1.1.0"},
                    {"memory": "40Gi"})]
    node2 = [device(f"gpu-{i}", {"model": "L4", "index": i, "healthy": True, "driverVersion": "v:2.0.0",
                                 "numa": i // 2}, {"memory": "24Gi"}) for i in range(3)]
    memory = f'device.capacity["{DRIVER}"].memory'

    def claims(ns: str, run: str) -> list[tuple[str, dict[str, Any]]]:
        out = one(ns, run, {
            "healthy-new": exactly(ns, f"{attr('healthy')} == true",
                                   f'{attr("driverVersion")}.isGreaterThan(semver("1.2.0"))',
                                   f'{memory}.compareTo(quantity("30Gi")) >= 0'),
            "second-a100": exactly(ns, f'{attr("index")} >= 1 && {attr("model")} == "A100"'),
            "too-big": exactly(ns, f'{memory}.compareTo(quantity("50Gi")) >= 0'),
            "no-such-attribute": exactly(ns, f'{attr("nope")} == "x"'),
        })
        out.append(claim(ns, f"{run}-same-numa", claim_spec(
            [{"name": "gpu", "exactly": exactly(ns, f'{attr("model")} == "L4"', count=2)}],
            [{"requests": ["gpu"], "matchAttribute": f"{DRIVER}/numa"}])))
        return out

    return DraCase(
        "selectors", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], node1), slice_(ns, nodes[1], node2), device_class(ns)],
        claims,
        [own("healthy-new", 1, 1), own("second-a100", 2, 1), own("same-numa", 3, 2),
         own("too-big", 4, 0), own("no-such-attribute", 4, 0)])


def _taints() -> DraCase:
    """Taints in the slices: node 1's GPU NoSchedule ``health=degraded``, node 2's GPUs NoExecute
    ``retiring`` and NoSchedule ``other``. Only tolerating pods get them, each where its tolerations
    reach."""
    health = {"key": "example.com/health", "value": "degraded", "effect": "NoSchedule"}
    retiring = {"key": "example.com/retiring", "effect": "NoExecute"}
    other = {"key": "example.com/other", "value": "x", "effect": "NoSchedule"}

    def tolerating(ns: str, *tolerations: dict[str, Any]) -> dict[str, Any]:
        return exactly(ns, tolerations=list(tolerations))

    return DraCase(
        "taints", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], [device("gpu-0", taints=[health])]),
                           slice_(ns, nodes[1], [device("gpu-0", taints=[retiring]), device("gpu-1", taints=[other])]),
                           device_class(ns)],
        lambda ns, run: one(ns, run, {
            "intolerant": exactly(ns),
            "wrong-value": tolerating(ns, {"key": "example.com/health", "operator": "Equal", "value": "broken",
                                           "effect": "NoSchedule"}),
            "health-equal": tolerating(ns, {"key": "example.com/health", "operator": "Equal", "value": "degraded",
                                            "effect": "NoSchedule"}),
            # The effect is named: kube-controller-manager's device taint eviction only counts a
            # toleration with effect NoExecute (pkg/controller/devicetainteviction claimEvictionTime)
            # and would evict the pod; the scheduler takes an empty effect as every effect.
            "retiring-exists": tolerating(ns, {"key": "example.com/retiring", "operator": "Exists",
                                               "effect": "NoExecute"}),
            "everything": tolerating(ns, {"operator": "Exists"}),
        }),
        [own("intolerant", 1, 0), own("wrong-value", 1, 0), own("health-equal", 1, 1),
         own("retiring-exists", 2, 2), own("everything", 3, 2)])


def _extended_resource() -> DraCase:
    """A DeviceClass mapping the extended resource ``example.com/gpu`` (DRAExtendedResource, GA in
    v1.37): pods ask for it in their container resources, the scheduler makes and allocates their
    claim. Node 1 has two devices, node 2 one."""
    gpu = "example.com/gpu"

    def mapped(ns: str) -> tuple[str, dict[str, Any]]:
        plural, cls = device_class(ns)
        return plural, {**cls, "spec": {**cls["spec"], "extendedResourceName": gpu}}

    return DraCase(
        "extended", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], [device("gpu-0"), device("gpu-1")]),
                           slice_(ns, nodes[1], [device("gpu-0")]), mapped(ns)],
        lambda ns, run: [],
        [CasePod("two", {}, 1, 1, {gpu: "2"}), CasePod("one", {}, 2, 2, {gpu: "1"}),
         CasePod("late", {}, 3, 0, {gpu: "1"})])


CASES = [_templates, _prioritized_list, _consumable_capacity, _selectors, _taints, _extended_resource]


@pytest.mark.parametrize("make_case", CASES, ids=lambda f: f.__name__.strip("_"))
def test_dra_case_matches_kube_scheduler(
    make_case: Any, control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path,
    nodes_to_delete: list[str], tmp_path: Path,
) -> None:
    case: DraCase = make_case()
    cp, ns = control_plane, cp_namespace
    nodes = cp.create_nodes(case.nodes, prefix=f"{ns}-{case.name}-", cpu="8", memory="32Gi", labels={GROUP: ns},
                            wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    case.create_objects(cp, ns, nodes)
    try:
        oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig,
                                watched(cp, ns, lambda name: case.run(cp, ns, nodes, name), case.slices))
    finally:
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
        cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")
        case.delete_objects(cp)
    print(f"\n[dra-{case.name}] kube-scheduler: {oracle}\n[dra-{case.name}] kubesched:      {ours}")
    expected = {p.name: p.node for p in case.pods}
    assert {n: p["node"] for n, p in oracle["pods"].items()} == expected
    assert oracle["problems"] == ours["problems"] == []
    assert oracle["claim_overlaps"] == ours["claim_overlaps"] == []
    assert oracle["most_claims_allocated"] > 0
    for name in sorted(expected):
        assert ours["pods"][name] == oracle["pods"][name], name
    assert all(oracle["pods"][name]["reason"] for name, node in expected.items() if not node)
