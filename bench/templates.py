"""scheduler_perf's pod and node templates (k8s.io/kubernetes v1.37.1,
test/integration/scheduler_perf/templates) as extra fields for bench/live.py and bench/simulator.py.

A template function returns the pod's extra ``labels`` and ``spec`` keys on top of pod-default (one
pause container, 100m cpu / 500Mi requests = limits, port 80). ``namespaces`` is the affinity
terms' namespace list: upstream puts init pods in sched-0 and measured pods in sched-1 and lists
both (the simulator does the same); the live harness keeps both in one namespace per round and
leaves it out (= the pod's own namespace), which selects the same pods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
UPSTREAM_NAMESPACES = ["sched-1", "sched-0"]

Template = Callable[[int], dict[str, Any]]


def pod_default(i: int) -> dict[str, Any]:
    """pod-default.yaml: nothing beyond the base pod."""
    return {}


def spread_pod(when: str) -> Template:
    """pod-with-topology-spreading.yaml (DoNotSchedule) / pod-with-preferred-topology-spreading.yaml
    (ScheduleAnyway): color=blue, maxSkew 5 over topology.kubernetes.io/zone, selector color=blue."""
    body = {
        "labels": {"color": "blue"},
        "topologySpreadConstraints": [{
            "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"color": "blue"}},
        }],
    }
    return lambda i: body


def _term(color: str, key: str, namespaces: list[str] | None) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key}
    if namespaces:
        term["namespaces"] = list(namespaces)
    return term


def anti_affinity_pod(namespaces: list[str] | None = None) -> Template:
    """pod-with-pod-anti-affinity.yaml: color=green, required anti-affinity to color=green per
    kubernetes.io/hostname (one such pod per node)."""
    body = {"labels": {"color": "green"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term("green", HOSTNAME, namespaces)]}}}
    return lambda i: body


def preferred_anti_affinity_pod(namespaces: list[str] | None = None) -> Template:
    """pod-with-preferred-pod-anti-affinity.yaml: color=yellow, preferred (weight 1) anti-affinity to
    color=yellow per hostname."""
    body = {"labels": {"color": "yellow"},
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"podAffinityTerm": _term("yellow", HOSTNAME, namespaces), "weight": 1}]}}}
    return lambda i: body


def pod_affinity_pod(namespaces: list[str] | None = None) -> Template:
    """pod-with-pod-affinity.yaml: color=blue, required affinity to color=blue per zone."""
    body = {"labels": {"color": "blue"},
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term("blue", ZONE, namespaces)]}}}
    return lambda i: body


def moon_zones(i: int) -> dict[str, Any]:
    """node-default with labelNodePrepareStrategy topology.kubernetes.io/zone in [moon-1, moon-2,
    moon-3] (upstream assigns the values round-robin)."""
    return {"labels": {ZONE: f"moon-{i % 3 + 1}"}}


def zone1(i: int) -> dict[str, Any]:
    """node-default with labelNodePrepareStrategy topology.kubernetes.io/zone in [zone1]."""
    return {"labels": {ZONE: "zone1"}}


def node_default(i: int) -> dict[str, Any]:
    return {}


# default_preemption/performance-config.yaml PreemptionBasic: pod-low-priority.yaml init pods
# (900m cpu, 500Mi; 4 per node-default node: 3.6 of its 4 cpu) and pod-high-priority.yaml measured
# pods (3970m cpu, priority 9999999): each measured pod preempts the 4 init pods of one node.
PREEMPTION_HIGH_PRIORITY = 9999999
PREEMPTION_HIGH_CLASS = "bench-preemption-high"


def low_priority_pod(i: int) -> dict[str, Any]:
    """pod-low-priority.yaml: 900m cpu / 500Mi, terminationGracePeriodSeconds 0, no priority."""
    return {"requests": {"cpu": "900m", "memory": "500Mi"}, "terminationGracePeriodSeconds": 0}


def high_priority_pod(*, by_class: bool) -> Template:
    """pod-high-priority.yaml: 3970m cpu / 500Mi, priority 9999999. ``by_class``: through a
    PriorityClass (an apiserver's Priority admission refuses a bare priority), else spec.priority
    (the simulator's inputs, admitted already)."""
    body: dict[str, Any] = {"requests": {"cpu": "3970m", "memory": "500Mi"}, "terminationGracePeriodSeconds": 0}
    if by_class:
        body["priorityClassName"] = PREEMPTION_HIGH_CLASS
    else:
        body["priority"] = PREEMPTION_HIGH_PRIORITY
    return lambda i: body


# -- podgroup/ and workload_preemption/ (GenericWorkload: the Workload API's PodGroups) ----------------
RACK = "topology.kubernetes.io/rack"
#: podgroup/tas/templates/node.yaml: zone-<i / 100> and rack-<i / 100>.
NODES_PER_RACK = 100
#: workload_preemption/templates/podgroup.yaml's default priority (8888888), as a PriorityClass
#: live (an apiserver's Priority admission refuses a bare priority) and spec.priority in the simulator.
GANG_PREEMPTOR_PRIORITY = 8888888
GANG_PREEMPTOR_CLASS = "bench-gang-preemptor"


def group_member_pod(prefix: str, per_group: int, cpu: str = "100m", priority: Template | None = None) -> Template:
    """podgroup/{gangscheduling,tas}/templates/gang-pod.yaml and basicscheduling/basic-pod.yaml:
    ``spec.schedulingGroup.podGroupName: <prefix>-<i / per_group>``, 100m cpu / 100Mi (``cpu``:
    workload_preemption's gang-pod.yaml takes its cpuRequest); ``priority`` adds the preemptor's
    priority fields (:func:`gang_preemptor_priority`)."""
    def pod(i: int) -> dict[str, Any]:
        body: dict[str, Any] = {"schedulingGroup": {"podGroupName": f"{prefix}-{i // per_group}"},
                                "requests": {"cpu": cpu, "memory": "100Mi"}}
        if priority is not None:
            body |= priority(i)
        return body
    return pod


def gang_preemptor_priority(*, by_class: bool) -> Template:
    """workload_preemption's gang-pod.yaml priority (8888888) with terminationGracePeriodSeconds 0;
    ``by_class`` as :func:`high_priority_pod`."""
    body: dict[str, Any] = {"terminationGracePeriodSeconds": 0}
    if by_class:
        body["priorityClassName"] = GANG_PREEMPTOR_CLASS
    else:
        body["priority"] = GANG_PREEMPTOR_PRIORITY
    return lambda i: body


def pod_group(name: str, ns: str, min_count: int | None, topology_key: str | None = None,
              priority: str | int | None = None) -> dict[str, Any]:
    """podgroup/*/templates/podgroup.yaml: a ``scheduling.k8s.io/v1beta1`` PodGroup with policy
    ``gang{minCount}`` (``min_count`` None: ``basic``), tas's ``schedulingConstraints.topology`` and
    workload_preemption's priority (a class name live, spec.priority in the simulator)."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if isinstance(priority, str):
        spec["priorityClassName"] = priority
    elif priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}"}, "spec": spec}


def rack_node(i: int) -> dict[str, Any]:
    """podgroup/tas/templates/node.yaml's labels: zone-<i / 100>, rack-<i / 100>."""
    return {"labels": {ZONE: f"zone-{i // NODES_PER_RACK}", RACK: f"rack-{i // NODES_PER_RACK}"}}


def gang_low_priority_pod(i: int) -> dict[str, Any]:
    """workload_preemption/templates/pod-low-priority.yaml: 40m cpu / 100Mi, priority 0,
    terminationGracePeriodSeconds 0 (its hostPort only spreads the pods, which are bound round-robin here)."""
    return {"requests": {"cpu": "40m", "memory": "100Mi"}, "terminationGracePeriodSeconds": 0}
