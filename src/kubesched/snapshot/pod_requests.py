"""A pod's effective resource requests, as the kube-scheduler accounts them.

Ports, from kubernetes/kubernetes:

* ``staging/src/k8s.io/component-helpers/resource/helpers.go``: ``PodRequests``,
  ``AggregateContainerRequests`` / ``aggregateContainerResourcesByFn`` (regular
  containers summed; each regular init container needs its own request plus every
  restartable "sidecar" init container started before it; sidecars also add to the
  running sum; result = max(containers + sidecars, largest init need)),
  ``applyPodLevelResources`` (pod-level ``spec.resources.requests`` override cpu,
  memory and ``hugepages-*``) and the final ``spec.overhead`` addition.
* ``pkg/scheduler/framework/types.go``: ``PodInfo.CalculateResource`` and
  ``getNonMissingContainerRequests`` (the "non-zero" requests used by scoring: every
  container lacking a cpu / memory request counts as 100m / 200Mi, i.e.
  ``schedutil.DefaultMilliCPURequest`` / ``DefaultMemoryRequest``; with pod-level
  requests set, the defaults apply only to resources the pod requests nowhere), and
  ``Resource.Add`` (cpu via ``MilliValue``, everything else via ``Value``; ``pods``
  ignored; only "scalar" names - extended, ``hugepages-*``, ``*kubernetes.io/*``,
  ``attachable-volumes-*`` - are kept besides cpu / memory / ephemeral-storage).
* ``pkg/apis/core/v1/defaults.go``: the API defaulting a pod gets on its way through
  the apiserver, see :func:`compute_pod_requests`.

Sums and maxima are taken on exact quantities and only converted to integers at the
end, exactly as upstream adds ``resource.Quantity`` values before ``MilliValue()``.

Not ported: the in-place-resize inputs (``UseStatusResources``: max of spec, allocated
and actuated requests from ``status``) and DRA node-allocatable claim status; requests
are computed from ``spec`` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

import orjson

from kubesched.api.quantity import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    QuantityError,
    milli_value,
    parse_quantity,
    round_up_to_milli,
    value,
)
from kubesched.api.validation import is_hugepage_resource_name, is_native_resource, is_scalar_resource_name

__all__ = ["PodResourceRequests", "compute_pod_requests", "is_scalar_resource_name"]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

ResourceList = dict[str, Fraction]

_NON_MISSING_DEFAULTS: Final[Mapping[str, Fraction]] = {
    CPU: Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000),
    MEMORY: Fraction(DEFAULT_MEMORY_REQUEST),
}


@dataclass(frozen=True, slots=True)
class PodResourceRequests:
    """Requests of one pod: cpu in millicores, everything else in units (``Value()``)."""

    milli_cpu: int
    memory: int
    ephemeral_storage: int
    scalar: Mapping[str, int] = field(default_factory=dict)
    non_zero_milli_cpu: int = 0
    non_zero_memory: int = 0
    #: Every amount above as one hashable value: pods with equal keys request the same, so
    #: plugins can share what they derive from the requests.
    key: tuple[object, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        key = (self.milli_cpu, self.memory, self.ephemeral_storage, self.non_zero_milli_cpu, self.non_zero_memory,
               *sorted(self.scalar.items()))
        object.__setattr__(self, "key", key)

    def as_dict(self) -> dict[str, int]:
        """``{"cpu": milli, "memory": ..., "ephemeral-storage": ..., **scalar}``, zeros omitted."""
        out: dict[str, int] = {}
        if self.milli_cpu:
            out[CPU] = self.milli_cpu
        if self.memory:
            out[MEMORY] = self.memory
        if self.ephemeral_storage:
            out[EPHEMERAL_STORAGE] = self.ephemeral_storage
        for name, amount in self.scalar.items():
            if amount:
                out[name] = amount
        return out


# --- resource-name helpers (the name rules themselves are in kubesched.api.validation) ---


def _is_supported_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or is_hugepage_resource_name(name)


def _is_overcommit_allowed(name: str) -> bool:
    # corev1helper.IsOvercommitAllowed: native and not hugepages.
    return is_native_resource(name) and not is_hugepage_resource_name(name)


# --- ResourceList arithmetic (helpers.go addResourceList / maxResourceList) ---


def _add(into: ResourceList, other: Mapping[str, Fraction]) -> None:
    for name, q in other.items():
        into[name] = into.get(name, Fraction(0)) + q


def _max(into: ResourceList, other: Mapping[str, Fraction]) -> None:
    for name, q in other.items():
        cur = into.get(name)
        if cur is None or q > cur:
            into[name] = q


# --- parsing ---


def _parse_list(raw: Any, where: str) -> ResourceList | None:
    """A ResourceList as decoded + defaulted by the apiserver (``None`` if absent)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise QuantityError(f"{where}: must be a map of resource name to quantity, got {raw!r}", raw)
    out: ResourceList = {}
    for name, q in raw.items():
        try:
            parsed = parse_quantity(q, from_json=True)
        except QuantityError as e:
            raise QuantityError(f"{where}.{name}: {e}", q) from None
        # SetDefaults_ResourceList: every quantity is rounded up to milli scale.
        out[str(name)] = round_up_to_milli(parsed)
    return out


@dataclass(slots=True)
class _Container:
    requests: ResourceList
    limits: ResourceList | None
    restartable: bool


def _parse_containers(spec: Mapping[str, Any], key: str, label: str) -> list[_Container]:
    raw = spec.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise QuantityError(f"spec.{key}: must be a list", raw)
    out: list[_Container] = []
    for i, c in enumerate(raw):
        if not isinstance(c, Mapping):
            raise QuantityError(f"spec.{key}[{i}]: must be an object", c)
        name = c.get("name")
        who = f'{label} "{name}"' if name else f"spec.{key}[{i}]"
        resources = c.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise QuantityError(f"{who}: resources must be an object", resources)
        requests = _parse_list(resources.get("requests"), f"{who}: requests")
        limits = _parse_list(resources.get("limits"), f"{who}: limits")
        # SetDefaults_Pod: requests default to limits, key by key.
        reqs: ResourceList = dict(requests) if requests is not None else {}
        if limits is not None:
            for rname, q in limits.items():
                reqs.setdefault(rname, q)
        out.append(_Container(reqs, limits, c.get("restartPolicy") == "Always"))
    return out


# --- aggregation ---


def _aggregate(
    containers: Iterable[_Container],
    init_containers: Iterable[_Container],
    non_missing: Mapping[str, Fraction] | None = None,
    *,
    limits: bool = False,
) -> ResourceList:
    """helpers.go aggregateContainerResourcesByFn over spec requests (or limits)."""

    def resources(c: _Container) -> Mapping[str, Fraction]:
        rl: Mapping[str, Fraction] = (c.limits or {}) if limits else c.requests
        if non_missing:
            # applyNonMissing: only resources absent from the container (an explicit 0 stays 0).
            missing = {k: v for k, v in non_missing.items() if k not in rl}
            if missing:
                return {**rl, **missing}
        return rl

    result: ResourceList = {}
    for c in containers:
        _add(result, resources(c))
    restartable_sum: ResourceList = {}
    init_max: ResourceList = {}
    for c in init_containers:
        rl = resources(c)
        if c.restartable:
            _add(result, rl)
            _add(restartable_sum, rl)
            _max(init_max, restartable_sum)
        else:
            combined = dict(rl)
            _add(combined, restartable_sum)
            _max(init_max, combined)
    _max(result, init_max)
    return result


@dataclass(slots=True)
class _Pod:
    containers: list[_Container]
    init_containers: list[_Container]
    pod_requests: ResourceList | None
    overhead: ResourceList | None

    def requests(self, non_missing: Mapping[str, Fraction] | None = None) -> ResourceList:
        """helpers.go PodRequests (spec only, overhead included)."""
        reqs = _aggregate(self.containers, self.init_containers, non_missing)
        if self.pod_level_requests_set():
            assert self.pod_requests is not None
            for name, q in self.pod_requests.items():
                if _is_supported_pod_level_resource(name):
                    reqs[name] = q
        if self.overhead is not None:
            _add(reqs, self.overhead)
        return reqs

    def pod_level_requests_set(self) -> bool:
        """helpers.go IsPodLevelRequestsSet."""
        return bool(self.pod_requests) and any(_is_supported_pod_level_resource(n) for n in self.pod_requests or {})


def _default_pod_level(pod: _Pod, pod_limits: ResourceList | None) -> None:
    """defaults.go defaultHugePagePodLimits + defaultPodRequests (PodLevelResources)."""
    if pod.pod_requests is None and pod_limits is None:
        return  # spec.resources absent
    requests = pod.pod_requests
    limits = pod_limits
    # defaultHugePagePodLimits
    if limits or requests:
        lims: ResourceList = dict(limits) if limits is not None else {}
        aggr_limits = _aggregate(pod.containers, pod.init_containers, limits=True)
        for name, q in aggr_limits.items():
            if not is_hugepage_resource_name(name):
                continue
            if requests is not None and name in requests:
                continue
            lims.setdefault(name, q)
        if lims:
            limits = lims
    # defaultPodRequests
    if not limits:
        return
    reqs: ResourceList = dict(requests) if requests is not None else {}
    for name, q in _aggregate(pod.containers, pod.init_containers).items():
        if name not in reqs and _is_supported_pod_level_resource(name) and _is_overcommit_allowed(name):
            reqs[name] = q
    for name, q in limits.items():
        if name not in reqs and _is_supported_pod_level_resource(name):
            reqs[name] = q
    if reqs:
        pod.pod_requests = reqs


#: compute_pod_requests results by the JSON of everything it reads: the pods of one workload share
#: a template, so the exact (Fraction) arithmetic runs once per template. Bounded; cleared when full.
_MEMO: dict[bytes, PodResourceRequests] = {}
_MEMO_MAX: Final = 4096


def _memo_key(spec: Any, pod_level_resources: bool) -> bytes | None:
    """The inputs of the computation (resources and restartPolicy of every container, overhead,
    pod-level resources) as JSON; None when the spec is not the expected shape (the computation
    then reports what is wrong)."""
    if not isinstance(spec, Mapping):
        return None
    parts: list[Any] = [pod_level_resources, spec.get("overhead"), spec.get("resources")]
    for key in ("containers", "initContainers"):
        raw = spec.get(key)
        if raw is None:
            parts.append(None)
            continue
        if not isinstance(raw, list) or not all(isinstance(c, Mapping) for c in raw):
            return None
        parts.append([(c.get("resources"), c.get("restartPolicy")) for c in raw])
    try:
        return orjson.dumps(parts)
    except (TypeError, orjson.JSONEncodeError):
        return None


def compute_pod_requests(pod: Mapping[str, Any], *, pod_level_resources: bool = True) -> PodResourceRequests:
    """Effective requests of a raw (JSON-decoded) v1 Pod, as the scheduler computes them
    (memoised by the JSON of the fields read; see :func:`_compute_pod_requests`)."""
    key = _memo_key(pod.get("spec") or {}, pod_level_resources)
    if key is not None:
        cached = _MEMO.get(key)
        if cached is not None:
            return cached
    result = _compute_pod_requests(pod, pod_level_resources=pod_level_resources)
    if key is not None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = result
    return result


def _compute_pod_requests(pod: Mapping[str, Any], *, pod_level_resources: bool = True) -> PodResourceRequests:
    """Effective requests of a raw (JSON-decoded) v1 Pod, as the scheduler computes them.

    Objects read from the apiserver are already defaulted; raw objects (files fed to the
    simulator) are not, so the relevant API defaulting is applied here first.  It is
    idempotent, so applying it to an already-defaulted pod changes nothing:

    * every quantity is rounded up to milli precision (``SetDefaults_ResourceList``);
    * per container, each resource with a limit but no request gets request = limit
      (``SetDefaults_Pod``);
    * with ``pod_level_resources`` (the PodLevelResources feature, on by default since
      v1.34): pod-level hugepage limits default from the containers' hugepage limits and
      missing pod-level requests default to the containers' aggregate (cpu / memory) or
      to the pod-level limit (``defaultHugePagePodLimits`` / ``defaultPodRequests``).

    Quantities are read with ``UnmarshalJSON`` semantics (surrounding whitespace
    trimmed, ``null`` is 0).  An invalid quantity raises :class:`QuantityError` naming
    the container and the field, e.g.
    ``container "app": requests.cpu: invalid quantity "1x": unknown suffix "x"``.
    """
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise QuantityError("spec: must be an object", spec)
    containers = _parse_containers(spec, "containers", "container")
    init_containers = _parse_containers(spec, "initContainers", "init container")
    overhead = _parse_list(spec.get("overhead"), "spec.overhead")
    pod_requests: ResourceList | None = None
    pod_limits: ResourceList | None = None
    if pod_level_resources:
        pod_resources = spec.get("resources")
        if pod_resources is not None:
            if not isinstance(pod_resources, Mapping):
                raise QuantityError("spec.resources: must be an object", pod_resources)
            pod_requests = _parse_list(pod_resources.get("requests"), "spec.resources.requests")
            pod_limits = _parse_list(pod_resources.get("limits"), "spec.resources.limits")
            if pod_requests is None and pod_limits is None:
                pod_requests = {}  # spec.resources: {} is present but empty
    p = _Pod(containers, init_containers, pod_requests, overhead)
    if pod_level_resources:
        _default_pod_level(p, pod_limits)

    requests = p.requests()

    # types.go getNonMissingContainerRequests + the second PodRequests call.
    if p.pod_level_requests_set():
        non_missing = {k: v for k, v in _NON_MISSING_DEFAULTS.items() if k not in requests}
    else:
        non_missing = dict(_NON_MISSING_DEFAULTS)
    non0 = p.requests(non_missing) if non_missing else requests

    scalar: dict[str, int] = {}
    milli_cpu = memory = ephemeral = 0
    for name, q in requests.items():  # types.go Resource.Add
        if name == CPU:
            milli_cpu = milli_value(q)
        elif name == MEMORY:
            memory = value(q)
        elif name == EPHEMERAL_STORAGE:
            ephemeral = value(q)
        elif name == PODS:
            continue
        elif is_scalar_resource_name(name):
            scalar[name] = value(q)
    return PodResourceRequests(
        milli_cpu=milli_cpu,
        memory=memory,
        ephemeral_storage=ephemeral,
        scalar=scalar,
        non_zero_milli_cpu=milli_value(non0.get(CPU, Fraction(0))),
        non_zero_memory=value(non0.get(MEMORY, Fraction(0))),
    )
