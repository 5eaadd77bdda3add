"""CoschedulingArgs (scheduler-plugins apis/config CoschedulingArgs)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic.alias_generators import to_camel

log = logging.getLogger(__name__)

DENIED_ALIAS = "deniedPGExpirationTimeSeconds"
DENIED_DEPRECATION = (
    f"CoschedulingArgs.{DENIED_ALIAS} is deprecated (removed from scheduler-plugins); it is read as "
    "podGroupBackoffSeconds: a rejected PodGroup's pods are refused at PreFilter for that many seconds"
)


class CoschedulingDeprecationWarning(FutureWarning):
    """A deprecated Coscheduling argument was used (shown to users by default)."""


class CoschedulingArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    #: How long the members of a group wait at Permit for the rest (a PodGroup's
    #: spec.scheduleTimeoutSeconds overrides it).
    permit_waiting_time_seconds: int = Field(60, ge=0)
    #: After a group is rejected, its pods are refused at PreFilter for this long (0: no backoff).
    pod_group_backoff_seconds: int = Field(0, ge=0)
    #: Deprecated alias of podGroupBackoffSeconds (older scheduler-plugins releases).
    denied_pg_expiration_time_seconds: int | None = Field(None, alias=DENIED_ALIAS, ge=0, exclude=True)

    _warnings: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _map_denied_alias(self) -> CoschedulingArgs:
        if self.denied_pg_expiration_time_seconds is not None:
            if "pod_group_backoff_seconds" not in self.model_fields_set:
                self.pod_group_backoff_seconds = self.denied_pg_expiration_time_seconds
            self._warnings.append(DENIED_DEPRECATION)
            # The config loader has no channel for plugin-args warnings yet: tell the user directly.
            log.warning(DENIED_DEPRECATION)
            warnings.warn(DENIED_DEPRECATION, CoschedulingDeprecationWarning, stacklevel=2)
        return self

    @property
    def config_warnings(self) -> list[str]:
        """Load-time warnings about these args (for a loader that collects them)."""
        return list(self._warnings)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, CoschedulingArgs):
            return NotImplemented
        return (self.permit_waiting_time_seconds, self.pod_group_backoff_seconds) == (
            other.permit_waiting_time_seconds,
            other.pod_group_backoff_seconds,
        )
