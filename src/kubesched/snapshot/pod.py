"""PodInfo: a pod parsed once from its raw JSON object, with what the scheduler reads hot.

The raw dict is kept (shells write it back, plugins may read any field); everything the cycle reads
per attempt is parsed here once. Plugins cache their own parsed views in ``memo`` (for example
NodeAffinity's compiled terms) so a pod that is retried is not parsed again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubesched.snapshot.pod_requests import PodResourceRequests, compute_pod_requests

DEFAULT_SCHEDULER_NAME = "default-scheduler"
_TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class HostPort:
    """A (hostIP, protocol, hostPort) a container asks for; hostIP "0.0.0.0" means all addresses."""

    ip: str
    protocol: str
    port: int


class PodSpecError(ValueError):
    """A pod object that cannot be scheduled as given; the message names the pod and field."""


def parse_timestamp(value: str | None) -> float:
    """RFC 3339 (as metadata.creationTimestamp) → epoch seconds; missing → 0."""
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass(slots=True, eq=False)
class PodInfo:
    raw: dict[str, Any]
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    priority: int
    creation_ts: float
    scheduler_name: str
    node_name: str
    requests: PodResourceRequests
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    host_ports: tuple[HostPort, ...]
    #: Per-plugin parsed views of this pod, keyed by plugin name.
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.raw.get("spec") or {}
        return spec

    @property
    def affinity(self) -> dict[str, Any]:
        aff: dict[str, Any] = self.spec.get("affinity") or {}
        return aff

    @property
    def deleting(self) -> bool:
        return bool((self.raw.get("metadata") or {}).get("deletionTimestamp"))

    @property
    def phase(self) -> str:
        return str((self.raw.get("status") or {}).get("phase") or "")

    @property
    def terminal(self) -> bool:
        return self.phase in _TERMINAL_PHASES

    def with_node(self, node_name: str) -> PodInfo:
        """A copy assigned to node_name (used when the scheduler assumes a placement)."""
        raw = dict(self.raw)
        raw["spec"] = {**self.spec, "nodeName": node_name}
        # Positional (field order), once per scheduled pod: keywords cost as much as the copy.
        return PodInfo(
            raw, self.uid, self.namespace, self.name, self.labels, self.priority, self.creation_ts,
            self.scheduler_name, node_name, self.requests, self.node_selector, self.tolerations,
            self.host_ports, self.memo,
        )

    @staticmethod
    def from_raw(raw: dict[str, Any], previous: PodInfo | None = None) -> PodInfo:
        """Parse a v1 Pod. Raises PodSpecError naming the pod and the offending field.

        With ``previous`` (the same pod parsed from an earlier version), an update that leaves
        the spec and the parsed metadata alone — a kubelet status update, the usual watch event of
        a running pod — reuses the parsed fields instead of parsing again."""
        if previous is not None and _same_parsed_inputs(previous.raw, raw):
            return PodInfo(
                raw=raw, uid=previous.uid, namespace=previous.namespace, name=previous.name,
                labels=previous.labels, priority=previous.priority, creation_ts=previous.creation_ts,
                scheduler_name=previous.scheduler_name, node_name=previous.node_name,
                requests=previous.requests, node_selector=previous.node_selector,
                tolerations=previous.tolerations, host_ports=previous.host_ports,
            )
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        namespace = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        if not name:
            raise PodSpecError("pod without metadata.name")
        where = f"pod {namespace}/{name}"
        if not isinstance(spec, dict):
            raise PodSpecError(f"{where}: spec must be an object")
        try:
            requests = compute_pod_requests(raw)
        except ValueError as e:
            raise PodSpecError(f"{where}: {e}") from None
        priority = spec.get("priority")
        if priority is not None and not isinstance(priority, int):
            raise PodSpecError(f"{where}: spec.priority must be an integer, got {priority!r}")
        try:
            created = parse_timestamp(meta.get("creationTimestamp"))
        except ValueError:
            raise PodSpecError(
                f"{where}: metadata.creationTimestamp {meta.get('creationTimestamp')!r} is not RFC 3339"
            ) from None
        node_selector = spec.get("nodeSelector") or {}
        if not isinstance(node_selector, dict):
            raise PodSpecError(f"{where}: spec.nodeSelector must be a map of strings")
        tolerations = spec.get("tolerations") or []
        if not isinstance(tolerations, list):
            raise PodSpecError(f"{where}: spec.tolerations must be a list")
        return PodInfo(
            raw=raw,
            uid=raw_pod_uid(raw),
            namespace=namespace,
            name=name,
            labels=_string_map(meta.get("labels") or {}),
            priority=int(priority or 0),
            creation_ts=created,
            scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
            node_name=str(spec.get("nodeName") or ""),
            requests=requests,
            node_selector=_string_map(node_selector),
            tolerations=tolerations,
            host_ports=_host_ports(spec, where),
        )


def _string_map(value: dict[Any, Any]) -> dict[str, str]:
    """``value`` itself when its keys and values are all strings, as the apiserver sends them (no
    copy per pod: the informer's object and its PodInfo share it, and nothing modifies either),
    else a copy with both made strings (objects written by hand)."""
    for k, v in value.items():
        if type(k) is not str or type(v) is not str:
            return {str(k): str(v) for k, v in value.items()}
    return value


def _host_ports(spec: dict[str, Any], where: str) -> tuple[HostPort, ...]:
    """Host ports of regular and init containers, as upstream's GetContainerPorts (types.go)."""
    ports: list[HostPort] = []
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            for p in c.get("ports") or []:
                host_port = p.get("hostPort") or 0
                if not host_port:
                    continue
                if not isinstance(host_port, int) or not 0 < host_port < 65536:
                    raise PodSpecError(f"{where}: container {c.get('name')!r}: invalid hostPort {host_port!r}")
                ports.append(HostPort(str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), host_port))
    return tuple(ports)


def raw_pod_terminal(raw: dict[str, Any]) -> bool:
    """Whether a raw pod has finished (Succeeded or Failed), as PodInfo.terminal says of a parsed one."""
    return (raw.get("status") or {}).get("phase") in _TERMINAL_PHASES


def raw_pod_uid(raw: dict[str, Any]) -> str:
    """The key PodInfo.uid has for a raw pod: metadata.uid, or namespace/name for objects without
    one (files fed to the simulator)."""
    meta = raw.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")


#: The metadata fields PodInfo.from_raw reads (the spec is compared whole).
_PARSED_METADATA = ("uid", "namespace", "name", "labels", "creationTimestamp")


def _same_parsed_inputs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if old.get("spec") != new.get("spec"):
        return False
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return all(om.get(k) == nm.get(k) for k in _PARSED_METADATA)
