"""Binding conditions (DRADeviceBindingConditions, beta and on in v1.37): a device that must be
prepared before its pod is bound (e.g. attached over a fabric) says so with ``bindingConditions``;
its driver reports them in the claim's ``status.devices[].conditions``.

Port of pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go (v1.37.1):
``isClaimReadyForBinding``, ``isClaimTimeout``, ``isPodReadyForBinding``, ``hasBindingConditions``,
``getAllocatedDeviceStatus``, messages word for word (``device binding failed: ...``,
``device binding timeout: ...``). PreBind polls every 5 seconds until every binding condition of
the pod's claims is true, a binding failure condition is true, or ``bindingTimeout`` has passed;
Filter keeps a pod off an allocated claim whose binding failed or timed out, so that PostFilter
deallocates it.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubesched.framework.clock import Clock
from kubesched.plugins.dynamicresources.claims import allocation

#: PreBind's poll interval (wait.PollUntilContextTimeout(ctx, 5*time.Second, ...)).
POLL_SECONDS = 5.0


class BindingError(Exception):
    """ErrDeviceBindingFailed or ErrDeviceBindingTimeout, with upstream's text; ``status`` is the
    outcome as upstream's metrics label it (metrics.go BindingConditionsStatus*)."""

    status = "error"


class BindingFailedError(BindingError):
    """ErrDeviceBindingFailed: a binding failure condition is true."""

    status = "failure"


class BindingTimeoutError(BindingError):
    """ErrDeviceBindingTimeout: the conditions were not met within the binding timeout."""

    status = "timeout"


def _results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    alloc = allocation(claim) or {}
    return list((alloc.get("devices") or {}).get("results") or [])


def has_binding_conditions(claims: Sequence[Mapping[str, Any]]) -> bool:
    """hasBindingConditions: some allocated device of these claims has binding conditions."""
    return any(r.get("bindingConditions") for c in claims for r in _results(c))


def _device_status(claim: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any] | None:
    """getAllocatedDeviceStatus: the claim's first status entry for this result's device."""
    want = (result.get("driver"), result.get("pool"), result.get("device"))
    for d in (claim.get("status") or {}).get("devices") or []:
        if (d.get("driver"), d.get("pool"), d.get("device")) == want:
            return dict(d)
    return None


def _condition(status: Mapping[str, Any], condition_type: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == condition_type:
            return dict(c)
    return None


def is_claim_ready(claim: Mapping[str, Any]) -> bool:
    """isClaimReadyForBinding: every binding condition of its devices true (none: ready); raises
    BindingError when a binding failure condition is true."""
    if allocation(claim) is None:
        return False
    name = str((claim.get("metadata") or {}).get("name", ""))
    for result in _results(claim):
        if not result.get("bindingConditions"):
            continue
        status = _device_status(claim, result)
        if status is None:
            return False
        for failure in result.get("bindingFailureConditions") or []:
            c = _condition(status, failure)
            if c is not None and c.get("status") == "True":
                raise BindingFailedError(f"device binding failed: claim={name}, reason={c.get('reason', '')}, "
                                   f"message={_go_quote(str(c.get('message', '')))}")
        for wanted in result["bindingConditions"]:
            c = _condition(status, wanted)
            if c is None or c.get("status") != "True":
                return False
    return True


def is_claim_timed_out(claim: Mapping[str, Any], binding_timeout: float, now_wall: float) -> bool:
    """isClaimTimeout: a device has binding conditions and the allocation is older than the timeout."""
    alloc = allocation(claim)
    if alloc is None or not alloc.get("allocationTimestamp"):
        return False
    allocated = _parse_time(str(alloc["allocationTimestamp"]))
    if allocated is None:
        return False
    return any(r.get("bindingConditions") is not None and allocated + binding_timeout < now_wall
               for r in _results(claim))


def bindable(claim: Mapping[str, Any], binding_timeout: float, now_wall: float) -> bool:
    """Filter's check of an allocated claim: false when a failure condition is true, or the
    conditions are not met within ``binding_timeout`` of its allocation (PostFilter may then
    deallocate it, so that other devices are tried)."""
    try:
        return is_claim_ready(claim) or not is_claim_timed_out(claim, binding_timeout, now_wall)
    except BindingError:
        return False


def is_pod_ready(claims: Sequence[Mapping[str, Any]], binding_timeout: float, now_wall: float) -> bool:
    """isPodReadyForBinding over the claims as they are now: raises BindingError on a failure
    condition or a claim past its binding timeout."""
    for claim in claims:
        if not is_claim_ready(claim):
            if is_claim_timed_out(claim, binding_timeout, now_wall):
                name = str((claim.get("metadata") or {}).get("name", ""))
                raise BindingTimeoutError(f"device binding timeout: claim={name}")
            return False
    return True


def _parse_time(value: str) -> float | None:
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _go_quote(s: str) -> str:
    """Go's %q for printable text: double quotes, backslash and quote escaped."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def wait_until_ready(claims_now: Callable[[], list[dict[str, Any]]], clock: Clock, binding_timeout: float,
                           poll_seconds: float = POLL_SECONDS) -> None:
    """PreBind's wait (wait.PollUntilContextTimeout, immediate): the claims as the plugin sees them
    now, checked at once and every ``poll_seconds`` until ready; raises BindingError on a failure
    condition, a claim past its timeout, or ``binding_timeout`` (the clock's) passed. A shell whose
    clock stands still while a binding cycle waits (the simulator: no DRA driver runs there, so no
    condition can ever change) gets the timeout at once instead of after ``binding_timeout``."""
    deadline = clock.now() + binding_timeout
    while True:
        if is_pod_ready(claims_now(), binding_timeout, clock.wall()):
            return
        before = clock.now()
        if before >= deadline:
            raise BindingTimeoutError("device binding timeout: context deadline exceeded")
        await asyncio.sleep(min(poll_seconds, deadline - before))
        if clock.now() == before:
            raise BindingTimeoutError("device binding timeout: context deadline exceeded")
