"""DomainCapArgs: which pods are capped, per which node label, and at how many."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from kubesched.framework import LabelSelector

#: A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63
#: characters (alphanumerics, '-', '_', '.'; starting and ending alphanumeric).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_KEY = re.compile(rf"^(({_PREFIX})/)?{_NAME}$")


class DomainCapArgs(BaseModel):
    # camelCase in YAML (topologyKey, maxPods, ...), snake_case from Python; a misspelt key is an
    # error naming it rather than a silently ignored setting.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    #: The node label whose values are the domains (zones, racks, power feeds, ...).
    topology_key: str = "topology.kubernetes.io/zone"
    #: At most this many selected pods per domain. Required: there is no sensible default.
    max_pods: int = Field(ge=1, le=1_000_000)
    #: The pods that are capped (and counted). An empty selector ({}) selects every pod.
    pod_selector: LabelSelector
    #: Nodes without the topology label: "Reject" keeps selected pods off them (they belong to no
    #: domain, so the cap cannot be enforced); "Ignore" lets selected pods land there uncapped.
    nodes_without_key: Literal["Reject", "Ignore"] = "Reject"

    @field_validator("topology_key")
    @classmethod
    def _valid_label_key(cls, v: str) -> str:
        prefix, _, _ = v.rpartition("/")
        if not _LABEL_KEY.match(v) or len(prefix) > 253:
            raise ValueError("must be a label key: [prefix/]name, e.g. topology.kubernetes.io/zone")
        return v
