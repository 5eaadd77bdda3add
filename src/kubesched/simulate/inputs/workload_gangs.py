"""Generated gangs of the Workload API (``kubesched simulate --nodes N --gangs SPEC``).

A spec is ``KEY=VALUE[,KEY=VALUE...]`` (the key=value list of ``--drain-selector``), one
``--gangs`` per shape of gang::

    --gangs count=4,members=8                 # 4 gangs of 8 pods, each placed all or nothing
    --gangs count=2,members=6,minCount=4,cpu=2,memory=8Gi,namespace=training
    --gangs count=10,members=3,policy=basic   # groups without the gang constraint

Keys: ``count`` (gangs of this shape, default 1), ``members`` (pods per gang, required),
``minCount`` (``schedulingPolicy.gang.minCount``, default ``members``; larger than ``members``
makes a gang that can never complete), ``policy`` (``gang``, the default, or ``basic``),
``cpu`` and ``memory`` (each member's requests, default ``1`` and ``1Gi``), ``namespace``
(default ``training``).

Each gang is what a Job controller using the Workload API creates, as kube-apiserver v1.37 serves it
with the ``GenericWorkload`` gate on (staging/src/k8s.io/api/scheduling/v1beta1/types.go,
core/v1 ``PodSchedulingGroup``): a ``scheduling.k8s.io/v1beta1`` Workload ``gang-N`` with one
``podGroupTemplates`` entry ``workers``, a PodGroup ``gang-N`` made from it (``spec.workloadRef``
naming the Workload and the template, the template's ``schedulingPolicy``) and its member pods
``gang-N-0`` ... each joining through ``spec.schedulingGroup.podGroupName``. Members are pending
(never pre-bound) and arrive after the cluster's other pods; their names and uids come from a
random stream of their own, so the rest of the generated cluster is the same with or without gangs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubesched.api.quantity import QuantityError, parse_quantity
from kubesched.api.timestamps import rfc3339
from kubesched.config.decode import KIND, V1
from kubesched.framework.podgroup import GENERIC_WORKLOAD, POD_GROUP_OBJECTS, WORKLOAD_OBJECTS
from kubesched.simulate.inputs.workload_shapes import uid

__all__ = ["GangSpec", "GangSpecError", "generate_gangs", "parse_gang_spec"]

API_VERSION: Final = "scheduling.k8s.io/v1beta1"
#: The Workload's one PodGroup template, as ``spec.workloadRef.templateName`` names it.
TEMPLATE: Final = "workers"
KEYS: Final = ("count", "members", "minCount", "policy", "cpu", "memory", "namespace")
#: A DNS label (RFC 1123), what a namespace name must be.
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class GangSpecError(ValueError):
    """A ``--gangs`` spec that cannot be generated; the message names the spec and the field."""


@dataclass(frozen=True, slots=True)
class GangSpec:
    count: int
    members: int
    #: ``schedulingPolicy.gang.minCount``; None for the ``basic`` policy.
    min_count: int | None
    cpu: str = "1"
    memory: str = "1Gi"
    namespace: str = "training"


def parse_gang_spec(text: str) -> GangSpec:
    """``count=4,members=8,...`` as a :class:`GangSpec` (keys in the module docstring)."""

    def fail(message: str) -> GangSpecError:
        return GangSpecError(f"--gangs {text!r}: {message}")

    fields: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise fail(f"expected KEY=VALUE, got {part.strip()!r} (keys: {', '.join(KEYS)})")
        if key not in KEYS:
            raise fail(f"unknown field {key!r} (keys: {', '.join(KEYS)})")
        if key in fields:
            raise fail(f"{key} given twice")
        fields[key] = value

    def positive(key: str, default: int | None) -> int | None:
        if key not in fields:
            return default
        value = fields[key]
        if not value.isdigit() or int(value) < 1:
            raise fail(f"{key} must be a positive integer, got {value!r}")
        return int(value)

    if "members" not in fields:
        raise fail("members is required (the pods of each gang), e.g. members=8")
    members = positive("members", None)
    assert members is not None
    count = positive("count", 1)
    assert count is not None
    policy = fields.get("policy", "gang")
    if policy not in ("gang", "basic"):
        raise fail(f"policy must be gang or basic, got {policy!r}")
    if policy == "basic" and "minCount" in fields:
        raise fail("minCount is a gang's: not with policy=basic")
    min_count = positive("minCount", members) if policy == "gang" else None
    for key, default in (("cpu", "1"), ("memory", "1Gi")):
        try:
            if parse_quantity(fields.get(key, default)) < 0:
                raise QuantityError("negative")
        except QuantityError:
            raise fail(f"{key} must be a quantity such as 500m, 2 or 4Gi, got {fields[key]!r}") from None
    namespace = fields.get("namespace", "training")
    if len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        raise fail(f"namespace must be a DNS label (lower-case letters, digits and '-'), got {namespace!r}")
    return GangSpec(count, members, min_count, fields.get("cpu", "1"), fields.get("memory", "1Gi"), namespace)


@dataclass(slots=True)
class GeneratedGangs:
    pods: list[dict[str, Any]]
    #: kind (the name ``handle.objects`` knows it by) → ``namespace/name`` → object.
    objects: dict[str, dict[str, dict[str, Any]]]


def _policy(spec: GangSpec) -> dict[str, Any]:
    return {"gang": {"minCount": spec.min_count}} if spec.min_count is not None else {"basic": {}}


def _meta(name: str, namespace: str, rng: random.Random, created: int) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": uid(rng), "creationTimestamp": rfc3339(created)}


def _member(name: str, group: str, spec: GangSpec, rng: random.Random, created: int) -> dict[str, Any]:
    meta = _meta(name, spec.namespace, rng, created)
    meta["labels"] = {"app.kubernetes.io/name": group}
    container = {"name": "worker", "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent",
                 "resources": {"requests": {"cpu": spec.cpu, "memory": spec.memory}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [container],
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",  # as the apiserver's Priority admission fills it
            "schedulingGroup": {"podGroupName": group},
        },
        "status": {"phase": "Pending"},
    }


def generate_gangs(specs: Sequence[GangSpec], seed: int, created_after: int) -> GeneratedGangs:
    """The Workloads, PodGroups and member pods of ``specs``, named ``gang-1``, ``gang-2``, ... in
    spec order; created one second apart after ``created_after`` (epoch seconds)."""
    rng = random.Random(f"workload-gangs-{seed}")  # a stream of their own (module docstring)
    pods: list[dict[str, Any]] = []
    workloads: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    clock = created_after
    n = 0
    for spec in specs:
        for _ in range(spec.count):
            n += 1
            clock += 1
            name = f"gang-{n}"
            key = f"{spec.namespace}/{name}"
            workloads[key] = {
                "apiVersion": API_VERSION, "kind": "Workload", "metadata": _meta(name, spec.namespace, rng, clock),
                "spec": {"podGroupTemplates": [{"name": TEMPLATE, "schedulingPolicy": _policy(spec)}]},
            }
            groups[key] = {
                "apiVersion": API_VERSION, "kind": "PodGroup", "metadata": _meta(name, spec.namespace, rng, clock),
                "spec": {"workloadRef": {"workloadName": name, "templateName": TEMPLATE},
                         "schedulingPolicy": _policy(spec)},
            }
            pods += [_member(f"{name}-{i}", name, spec, rng, clock) for i in range(spec.members)]
    objects = {WORKLOAD_OBJECTS: workloads, POD_GROUP_OBJECTS: groups} if groups else {}
    return GeneratedGangs(pods, objects)


def gang_config_source(config_path: Path | None, gangs: bool, default: Path | None = None
                       ) -> Path | dict[str, Any] | None:
    """What a command generating gangs loads as its configuration: without ``--config``, the default
    profile with the gate that schedules the Workload API's gangs (GangScheduling); ``default``: the
    command's configuration when there are no gangs and no ``--config`` (e.g. the demo's)."""
    if config_path is not None:
        return config_path
    if gangs:
        return {"apiVersion": V1, "kind": KIND, "featureGates": {GENERIC_WORKLOAD: True}}
    return default


def gate_off_error(feature_gates: Mapping[str, bool], config_path: Path | None) -> str | None:
    """The error for gangs under a ``--config`` that leaves GenericWorkload off (their pods would be
    scheduled one by one), None when it is on."""
    if feature_gates.get(GENERIC_WORKLOAD):
        return None
    return (f"--gangs: --config {config_path} leaves the {GENERIC_WORKLOAD} feature gate off, so the gangs' pods "
            f"would be scheduled one by one: add 'featureGates: {{{GENERIC_WORKLOAD}: true}}' to it")
