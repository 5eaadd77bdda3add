"""PodTopologySpreadArgs with upstream defaults and validation.

* types: ``staging/src/k8s.io/kube-scheduler/config/v1/types_pluginargs.go`` (``PodTopologySpreadArgs``,
  ``PodTopologySpreadConstraintsDefaulting``: ``System`` | ``List``) and
  ``k8s.io/api/core/v1`` ``TopologySpreadConstraint``;
* defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_PodTopologySpreadArgs``
  (an unset ``defaultingType`` is ``System``);
* validation: ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
  ``ValidatePodTopologySpreadArgs`` (``validateDefaultingType``, ``validateTopologyKey``,
  ``validateWhenUnsatisfiable``, ``validateConstraintNotRepeat``).

Messages are upstream's ``field.Error`` strings with paths relative to the args
(``defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)``); the
configuration loader prefixes them with ``profiles[i].pluginConfig[j].args``. Several are joined
as ``ErrorList.ToAggregate()`` prints them (``[e1, e2]``).
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from kubesched.plugins.helpers.label_selector import label_key_error

SYSTEM_DEFAULTING: Final = "System"
LIST_DEFAULTING: Final = "List"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"


class TopologySpreadConstraint(BaseModel):
    """v1.TopologySpreadConstraint as a default constraint (``labelSelector`` is forbidden there)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = Field(default_factory=list)

    def raw(self) -> dict[str, Any]:
        """The constraint as the v1 JSON a pod spec would carry."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _q(v: Any) -> str:
    return json.dumps(v) if isinstance(v, str) else str(v)


class PodTopologySpreadArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    default_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    defaulting_type: str = SYSTEM_DEFAULTING

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # SetDefaults_PodTopologySpreadArgs: "" (or absent/null) means System.
        if isinstance(data, dict):
            for k in ("defaultingType", "defaulting_type"):
                if k in data and not data[k]:
                    data = {**data, k: SYSTEM_DEFAULTING}
        return data

    @model_validator(mode="after")
    def _validate(self) -> PodTopologySpreadArgs:
        errs: list[str] = []
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errs.append(f"defaultingType: Unsupported value: {_q(self.defaulting_type)}: supported values: "
                        f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"')
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errs.append(f"defaultingType: Invalid value: {_q(self.defaulting_type)}: "
                        "when .defaultConstraints are not empty")
        for i, c in enumerate(self.default_constraints):
            p = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                errs.append(f"{p}.maxSkew: Invalid value: {c.max_skew}: not in valid range (0, inf)")
            if not c.topology_key:
                errs.append(f"{p}.topologyKey: Required value: can not be empty")
            else:
                key_err = label_key_error(c.topology_key)
                if key_err:
                    errs.append(f"{p}.topologyKey: Invalid value: {_q(c.topology_key)}: {key_err}")
            if not c.when_unsatisfiable:
                errs.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
            elif c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                errs.append(f"{p}.whenUnsatisfiable: Unsupported value: {_q(c.when_unsatisfiable)}: "
                            f'supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"')
            if c.label_selector is not None:
                errs.append(f"{p}.labelSelector: Forbidden: constraint must not define a selector, "
                            "as they deduced for each pod")
            for other in self.default_constraints[:i]:
                if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                    errs.append(f'defaultConstraints[{i}]: Duplicate value: "{{{c.topology_key}, '
                                f'{c.when_unsatisfiable}}}"')
                    break
        if errs:
            raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return self
