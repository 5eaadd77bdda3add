"""``kubesched explain POD`` against a live cluster: one list of nodes and pods into a fresh cache,
then the same one-off explain cycle the simulator uses, printed with the same table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubesched.config.load import SchedulerConfig
from kubesched.framework.clock import RealClock
from kubesched.framework.explain import Explanation, explain
from kubesched.framework.registry import Registry, profiles_object_kinds
from kubesched.kube.api import ApiClient, ApiError
from kubesched.kube.informer import object_key
from kubesched.kube.objects import list_all
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo, PodSpecError
from kubesched.snapshot.table import NodeSpecError


class ExplainError(Exception):
    pass


@dataclass(slots=True)
class LiveExplanation:
    explanation: Explanation
    pod: PodInfo
    nodes: int
    pods: int
    #: Set when the pod's schedulerName matches no profile and another profile was used.
    note: str = ""


async def explain_live(
    api: ApiClient,
    config: SchedulerConfig,
    registry: Registry,
    name: str,
    namespace: str,
    profile: str | None = None,
) -> LiveExplanation:
    try:
        raw_pod = await api.request("GET", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}")
    except ApiError as e:
        if e.status == 404:
            raise ExplainError(f"pod {namespace}/{name} not found") from None
        raise
    try:
        target = PodInfo.from_raw(raw_pod)
    except PodSpecError as e:
        raise ExplainError(str(e)) from None
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in profiles_object_kinds(registry, config.profiles, config.feature_gates):
        try:
            listed = await list_all(api, kind.collection_path)
        except ApiError as e:
            if e.status != 404:  # 404: the kind's CRD is not installed; the plugin sees none
                raise
            listed = []
        objects[kind.name] = {object_key(o): o for o in listed}
    scheduler = Scheduler.build(
        config.profiles, registry, RealClock(), parallelism=config.parallelism,
        objects=lambda kind: objects.get(kind, {}), feature_gates=config.feature_gates,
    )
    nodes = await list_all(api, "/api/v1/nodes")
    pods = await list_all(api, "/api/v1/pods")
    for raw in nodes:
        try:
            scheduler.on_node_add_or_update(raw)
        except NodeSpecError:
            continue
    for raw in pods:
        try:
            pod = PodInfo.from_raw(raw)
        except PodSpecError:
            continue
        if pod.node_name:
            scheduler.cache.add_or_update_pod(pod)
        elif not pod.terminal:
            # Queued, never scheduled: plugins that count pending pods (a gang's members, for
            # ``explain_wait``) read them from the queue, as in the running scheduler.
            scheduler.on_pod_add(pod)
    note = ""
    wanted = profile or target.scheduler_name
    fwk = scheduler.frameworks.get(wanted)
    if fwk is None:
        if profile is not None:
            raise ExplainError(f"no profile {profile!r} in the configuration ({', '.join(scheduler.frameworks)})")
        fwk = next(iter(scheduler.frameworks.values()))
        note = (
            f"schedulerName {target.scheduler_name!r} matches no profile of this configuration; "
            f"explained with profile {fwk.profile_name!r}"
        )
    return LiveExplanation(explain(fwk, target), target, len(nodes), len(pods), note)
