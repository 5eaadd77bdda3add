"""UnderlayIPArgs: the per-node underlay IP budget and which pods consume it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from kubesched.framework.labels import LabelSelector
from kubesched.plugins.underlay_ip.kinds import parse_duration

#: Node label or annotation that overrides ``ipsPerNode`` for one node (an integer ≥ 0).
DEFAULT_CAPACITY_KEY = "kubesched.io/underlay-ips"
#: Pod annotation the assigned address(es) are written to (comma-separated), for the CNI to read.
DEFAULT_ANNOTATION_KEY = "kubesched.io/underlay-ip"


class UnderlayIPArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    #: IPs each node can hand out (the reference's ``--ip-resource``, default 10).
    ips_per_node: int = Field(10, ge=0, le=100_000)
    #: A node label or annotation with this key overrides ``ipsPerNode`` for that node.
    capacity_key: str = DEFAULT_CAPACITY_KEY
    #: Which pods consume an IP. Default: every pod whose schedulerName is this profile's.
    pod_selector: LabelSelector | None = None
    #: Extended-resource style: when set, a pod consumes as many IPs as it requests of this
    #: resource (e.g. ``kubesched.io/underlay-ip: 1``), and pods not requesting it consume none.
    resource_name: str | None = None
    #: Nodes labelled node-role.kubernetes.io/control-plane or .../master get no IPs (without
    #: pools; with pools, the pools say which nodes they serve).
    exclude_control_plane: bool = True
    #: With UnderlayIPPools: the pod annotation the assigned address is written to (at bind).
    annotation_key: str = Field(DEFAULT_ANNOTATION_KEY, min_length=1)
    #: Cluster-wide cap on the underlay IPs pods of this profile hold (BlueKing v2's quota).
    quota: int | None = Field(None, ge=0)
    #: With UnderlayIPPools: a pod controlled by a StatefulSet keeps its address for its ``ns/name``
    #: this long after it is gone (a Go duration: ``30m``, ``24h``), as if an UnderlayIPClaim of
    #: its name with this ``keepDuration`` were declared (one of the same name wins). None: only
    #: declared claims keep addresses.
    stateful_set_keep_duration: str | None = None

    @field_validator("stateful_set_keep_duration")
    @classmethod
    def _a_positive_duration(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value, "statefulSetKeepDuration") <= 0:
            raise ValueError("must be more than 0 (leave it out to keep no address)")
        return value

    @property
    def stateful_set_keep_seconds(self) -> float | None:
        text = self.stateful_set_keep_duration
        return None if text is None else parse_duration(text, "statefulSetKeepDuration")
