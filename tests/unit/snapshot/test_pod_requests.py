"""Tables mirror k8s.io/component-helpers/resource/helpers_test.go (TestPodRequestsAndLimits,
restartable init containers, overhead, pod-level resources) and
pkg/scheduler/framework/types_test.go (TestCalculateResource / non-zero requests)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.quantity import QuantityError
from kubesched.snapshot.pod_requests import PodResourceRequests, compute_pod_requests, is_scalar_resource_name

MI = 1 << 20
GI = 1 << 30
DEF_CPU = 100
DEF_MEM = 200 * MI


def c(
    name: str, req: dict[str, Any] | None = None, lim: dict[str, Any] | None = None, sidecar: bool = False
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req is not None:
        res["requests"] = req
    if lim is not None:
        res["limits"] = lim
    out: dict[str, Any] = {"name": name, "resources": res}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": containers, **spec}
    if init is not None:
        s["initContainers"] = init
    return {"metadata": {"name": "p"}, "spec": s}


# (description, pod, expected cpu millis, expected memory bytes)
CASES: list[tuple[str, dict[str, Any], int, int]] = [
    ("no requests", pod([c("c1")]), 0, 0),
    ("one container", pod([c("c1", {"cpu": "1", "memory": "1Gi"})]), 1000, GI),
    ("two containers", pod([c("c1", {"cpu": "1"}), c("c2", {"cpu": "500m", "memory": "1Gi"})]), 1500, GI),
    ("init container larger than sum", pod([c("c1", {"cpu": "1"})], [c("i1", {"cpu": "2"})]), 2000, 0),
    ("init container smaller than sum", pod([c("c1", {"cpu": "2"})], [c("i1", {"cpu": "1"})]), 2000, 0),
    # helpers_test.go "restartable init container": sidecars add
    ("restartable init container", pod([c("c1", {"cpu": "1"})], [c("ri1", {"cpu": "1"}, sidecar=True)]), 2000, 0),
    (
        "multiple restartable init containers",  # max(5, 1+2+3+1) = 7
        pod(
            [c("c1", {"cpu": "1"})],
            [
                c("init-1", {"cpu": "5"}),
                c("ri1", {"cpu": "1"}, sidecar=True),
                c("ri2", {"cpu": "2"}, sidecar=True),
                c("ri3", {"cpu": "3"}, sidecar=True),
            ],
        ),
        7000,
        0,
    ),
    (
        "multiple restartable and regular init containers",  # init-2: 5 + (1+2) = 8
        pod(
            [c("c1", {"cpu": "1"})],
            [
                c("init-1", {"cpu": "5"}),
                c("ri1", {"cpu": "1"}, sidecar=True),
                c("ri2", {"cpu": "2"}, sidecar=True),
                c("init-2", {"cpu": "5"}),
                c("ri3", {"cpu": "3"}, sidecar=True),
            ],
        ),
        8000,
        0,
    ),
    (
        "restartable-init, init and regular",  # init-1 200 + sidecar 10 = 210
        pod([c("c1", {"cpu": "100"})], [c("ri1", {"cpu": "10"}, sidecar=True), c("init-1", {"cpu": "200"})]),
        210000,
        0,
    ),
    (
        "sidecar larger than everything else",  # restartable running sum itself is a max candidate
        pod([c("c1", {"cpu": "1"})], [c("ri1", {"cpu": "5"}, sidecar=True)]),
        6000,
        0,
    ),
    (
        "limits default requests",
        pod([c("c1", None, {"cpu": "2", "memory": "1Gi"}), c("c2", {"cpu": "1"}, {"cpu": "3", "memory": "1Mi"})]),
        3000,
        GI + MI,
    ),
    (
        "overhead",
        pod([c("c1", {"cpu": "1", "memory": "1Gi"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        1250,
        GI + 120 * MI,
    ),
    (
        "init max then overhead",
        pod([c("c1", {"cpu": "1"})], [c("i1", {"cpu": "3"})], overhead={"cpu": "500m"}),
        3500,
        0,
    ),
    # exact aggregation, then one rounding (as Quantity.Add then MilliValue) after milli defaulting
    ("sum before rounding", pod([c("c1", {"memory": "0.5"}), c("c2", {"memory": "0.5"})]), 0, 1),
    ("milli defaulting rounds each quantity", pod([c("c1", {"cpu": "0.1m"}), c("c2", {"cpu": "0.1m"})]), 2, 0),
    ("json numbers", pod([c("c1", {"cpu": 2, "memory": 1048576})]), 2000, MI),
]


@pytest.mark.parametrize(("desc", "p", "cpu", "mem"), CASES, ids=[x[0] for x in CASES])
def test_requests(desc: str, p: dict[str, Any], cpu: int, mem: int) -> None:
    r = compute_pod_requests(p)
    assert (r.milli_cpu, r.memory) == (cpu, mem)


# types_test.go: NonZeroRequested - 100m / 200Mi per container lacking the request,
# with the same init/sidecar/overhead rules.
NON_ZERO_CASES: list[tuple[str, dict[str, Any], int, int]] = [
    ("best effort", pod([c("c1")]), DEF_CPU, DEF_MEM),
    ("two best effort containers", pod([c("c1"), c("c2")]), 2 * DEF_CPU, 2 * DEF_MEM),
    ("cpu only", pod([c("c1", {"cpu": "1"})]), 1000, DEF_MEM),
    ("explicit zero is kept", pod([c("c1", {"cpu": "0", "memory": "0"})]), 0, 0),
    ("no containers", pod([]), 0, 0),
    (
        "init container with defaults",  # max(100m, 100m) each
        pod([c("c1")], [c("i1", {"memory": "1Gi"})]),
        DEF_CPU,
        GI,
    ),
    (
        "sidecar gets defaults and adds",
        pod([c("c1", {"cpu": "1"})], [c("ri1", None, sidecar=True)]),
        1000 + DEF_CPU,
        2 * DEF_MEM,
    ),
    (
        "overhead adds to non-zero",
        pod([c("c1")], overhead={"cpu": "10m", "memory": "10Mi"}),
        DEF_CPU + 10,
        DEF_MEM + 10 * MI,
    ),
]


@pytest.mark.parametrize(("desc", "p", "cpu", "mem"), NON_ZERO_CASES, ids=[x[0] for x in NON_ZERO_CASES])
def test_non_zero_requests(desc: str, p: dict[str, Any], cpu: int, mem: int) -> None:
    r = compute_pod_requests(p)
    assert (r.non_zero_milli_cpu, r.non_zero_memory) == (cpu, mem)


def test_non_zero_with_requests_set() -> None:
    r = compute_pod_requests(pod([c("c1", {"cpu": "250m", "memory": "64Mi"})], [c("i1", {"cpu": "1"})]))
    assert (r.milli_cpu, r.memory) == (1000, 64 * MI)
    # i1 has no memory request -> 200Mi for it, which exceeds c1's 64Mi
    assert (r.non_zero_milli_cpu, r.non_zero_memory) == (1000, DEF_MEM)


def test_scalar_and_ephemeral_and_pods() -> None:
    r = compute_pod_requests(
        pod(
            [
                c(
                    "c1",
                    {
                        "cpu": "1",
                        "ephemeral-storage": "1Gi",
                        "pods": "3",
                        "example.com/gpu": "2",
                        "hugepages-2Mi": "4Mi",
                        "nvidia.com/gpu": "1",
                        "unknownnative": "5",
                    },
                ),
            ],
            [c("i1", {"example.com/gpu": "3"})],
        )
    )
    assert r.ephemeral_storage == GI
    assert dict(r.scalar) == {"example.com/gpu": 3, "hugepages-2Mi": 4 * MI, "nvidia.com/gpu": 1}
    assert r.as_dict() == {
        "cpu": 1000,
        "ephemeral-storage": GI,
        "example.com/gpu": 3,
        "hugepages-2Mi": 4 * MI,
        "nvidia.com/gpu": 1,
    }


def test_as_dict_omits_zero() -> None:
    r = PodResourceRequests(milli_cpu=0, memory=5, ephemeral_storage=0, scalar={"a.b/c": 0, "x.y/z": 2})
    assert r.as_dict() == {"memory": 5, "x.y/z": 2}


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("example.com/gpu", True),
        ("hugepages-1Gi", True),
        ("attachable-volumes-aws-ebs", True),
        ("kubernetes.io/foo", True),
        ("cpu", False),
        ("pods", False),
        ("foo", False),
        ("requests.example.com/x", False),
        ("Example.com/x", False),  # prefix must be a lowercase DNS subdomain
    ],
)
def test_is_scalar_resource_name(name: str, scalar: bool) -> None:
    assert is_scalar_resource_name(name) is scalar


# helpers_test.go pod-level resources (PodLevelResources feature).
def test_pod_level_requests_override_containers() -> None:
    p = pod([c("c1", {"cpu": "1", "memory": "1Gi"})], resources={"requests": {"cpu": "3"}})
    r = compute_pod_requests(p)
    assert (r.milli_cpu, r.memory) == (3000, GI)
    # pod-level request set: defaults only for resources the pod requests nowhere
    assert (r.non_zero_milli_cpu, r.non_zero_memory) == (3000, GI)
    # feature off: container sum
    assert compute_pod_requests(p, pod_level_resources=False).milli_cpu == 1000


def test_pod_level_requests_plus_overhead() -> None:
    p = pod([c("c1", {"cpu": "1"})], resources={"requests": {"cpu": "2"}}, overhead={"cpu": "100m"})
    assert compute_pod_requests(p).milli_cpu == 2100


def test_pod_level_non_zero_default_for_unrequested_memory() -> None:
    p = pod([c("c1"), c("c2")], resources={"requests": {"cpu": "2"}})
    r = compute_pod_requests(p)
    assert (r.milli_cpu, r.memory) == (2000, 0)
    assert (r.non_zero_milli_cpu, r.non_zero_memory) == (2000, 2 * DEF_MEM)


def test_pod_level_limits_default_requests() -> None:
    # defaultPodRequests: no container requests -> pod request = pod limit
    r = compute_pod_requests(pod([c("c1")], resources={"limits": {"cpu": "2", "memory": "1Gi"}}))
    assert (r.milli_cpu, r.memory) == (2000, GI)
    # containers request cpu -> pod cpu request = aggregate; memory from the pod limit
    r = compute_pod_requests(pod([c("c1", {"cpu": "500m"})], resources={"limits": {"cpu": "2", "memory": "1Gi"}}))
    assert (r.milli_cpu, r.memory) == (500, GI)


def test_pod_level_unsupported_resource_ignored() -> None:
    p = pod([c("c1", {"cpu": "1"})], resources={"requests": {"ephemeral-storage": "1Gi"}})
    r = compute_pod_requests(p)
    assert (r.milli_cpu, r.ephemeral_storage) == (1000, 0)
    assert (r.non_zero_milli_cpu, r.non_zero_memory) == (1000, DEF_MEM)


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (pod([c("app", {"cpu": "1x"})]), 'container "app": requests.cpu: invalid quantity "1x": unknown suffix "x"'),
        (pod([c("app", None, {"memory": "lots"})]), 'container "app": limits.memory: invalid quantity "lots"'),
        (pod([c("a")], [c("setup", {"cpu": ""})]), 'init container "setup": requests.cpu: invalid quantity ""'),
        (pod([c("a")], overhead={"cpu": "1.2.3"}), 'spec.overhead.cpu: invalid quantity "1.2.3"'),
        (pod([c("a")], resources={"requests": {"cpu": "x"}}), 'spec.resources.requests.cpu: invalid quantity "x"'),
    ],
)
def test_invalid_quantities_name_container_and_resource(p: dict[str, Any], message: str) -> None:
    with pytest.raises(QuantityError) as ei:
        compute_pod_requests(p)
    assert str(ei.value).startswith(message)


def test_whitespace_and_null_like_json_decode() -> None:
    r = compute_pod_requests(pod([c("c1", {"cpu": " 250m ", "memory": None})]))
    assert (r.milli_cpu, r.memory) == (250, 0)
    # memory key present (null -> 0): no 200Mi default
    assert r.non_zero_memory == 0


def test_empty_pod() -> None:
    r = compute_pod_requests({})
    assert r == PodResourceRequests(0, 0, 0, {}, 0, 0)


def test_pods_of_one_template_share_the_computation_but_any_input_difference_counts() -> None:
    def p(name: str, restart: str | None = None, cpu: str = "1") -> dict[str, Any]:
        init = {"name": "side", "resources": {"requests": {"cpu": "2"}}}
        if restart:
            init["restartPolicy"] = restart
        return {"metadata": {"name": name}, "spec": {
            "containers": [{"name": name, "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            "initContainers": [init],
        }}

    a, b = compute_pod_requests(p("a")), compute_pod_requests(p("b"))
    assert a is b  # container names do not matter: one computation
    assert a.milli_cpu == 2000  # init container: max(1, 2) cpu
    sidecar = compute_pod_requests(p("c", restart="Always"))
    assert sidecar.milli_cpu == 3000  # a restartable init container adds up
    assert compute_pod_requests(p("d", cpu="1500m")).milli_cpu == 2000
    assert compute_pod_requests(p("e", cpu="3")).milli_cpu == 3000
    with pytest.raises(QuantityError, match=r'container "f": requests\.cpu'):
        compute_pod_requests(p("f", cpu="1x"))
    with pytest.raises(QuantityError, match=r'container "g": requests\.cpu'):  # errors are not remembered
        compute_pod_requests(p("g", cpu="1x"))
