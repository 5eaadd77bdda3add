"""DynamicResourcesArgs (``k8s.io/kube-scheduler/config/v1`` types_pluginargs.go).

Defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_DynamicResourcesArgs``, with
v1.37's gates (DRASchedulerFilterTimeout, DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus all on): ``filterTimeout`` 10s, ``bindingTimeout`` 10m. Validation:
``validation_pluginargs.go`` ``ValidateDynamicResourcesArgs``, messages as ``field.Error`` prints
them (a ``metav1.Duration`` through its ``String()``).

``bindingTimeout`` bounds PreBind's wait for devices' binding conditions (binding_conditions.py),
``filterTimeout`` each node's allocation search in Filter (allocator.py, on the injected clock).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from kubesched.api.duration import GoDurationString, go_duration

#: configv1.DynamicResourcesFilterTimeoutDefault, DynamicResourcesBindingTimeoutDefault.
DEFAULT_FILTER_TIMEOUT_SECONDS = 10.0
DEFAULT_BINDING_TIMEOUT_SECONDS = 600.0


class DynamicResourcesArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    filter_timeout: GoDurationString = DEFAULT_FILTER_TIMEOUT_SECONDS
    binding_timeout: GoDurationString = DEFAULT_BINDING_TIMEOUT_SECONDS

    @model_validator(mode="after")
    def _validate(self) -> DynamicResourcesArgs:
        errs: list[str] = []
        if self.filter_timeout < 0:
            errs.append(f"filterTimeout: Invalid value: {go_duration(self.filter_timeout)}: must be zero or positive")
        if self.binding_timeout < 1:
            errs.append(f"bindingTimeout: Invalid value: {go_duration(self.binding_timeout)}: "
                        "must be at least 1 second")
        if errs:
            raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return self
