"""DynamicResources at PostFilter: deallocate a claim that kept nodes out instead of evicting.

Port of dynamicresources.go ``PostFilter`` / ``deallocateOrDeletePodClaims`` (Kubernetes v1.37.1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.interfaces import PostFilterPlugin
from kubesched.framework.objects import StatusWriter
from kubesched.framework.status import Status
from kubesched.framework.types import PostFilterResult
from kubesched.plugins.dynamicresources.binding import delete_claim
from kubesched.plugins.dynamicresources.claims import RESOURCE_CLAIM
from kubesched.plugins.dynamicresources.extended import is_special
from kubesched.plugins.dynamicresources.manager import DRAManager
from kubesched.plugins.dynamicresources.state import read_state
from kubesched.snapshot.pod import PodInfo


class ClaimDeallocation(PostFilterPlugin):
    """DynamicResources' PostFilter (plugin.py), and the claim writes it and Unreserve send in the
    background."""

    manager: DRAManager
    #: Claim writes in flight (kept referenced until done).
    _deallocations: set[asyncio.Future[Any]]

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        """deallocateOrDeletePodClaims: an allocated claim that kept some node out and that no other
        pod uses (reservedFor empty, or only this pod) is deallocated, so the next attempt may
        allocate it anew, instead of evicting pods. Upstream picks such a claim at random (Go map
        order); kubesched takes the first in ``spec.resourceClaims`` order, so a simulation stays
        reproducible. The write (``status`` without allocation, reservedFor and devices, through the
        status subresource) is sent at once and awaited in the background: the claim's update event
        brings the pod back."""
        s = read_state(state)
        if s is None:
            # This plugin's PreFilter never ran: an earlier PreFilter refused the pod as
            # unresolvable (a missing PVC, say) and upstream's RunPreFilterPlugins stops there.
            # Upstream's PostFilter then fails to read its state and returns an Error ("not
            # found"), which ends the PostFilter phase before DefaultPreemption and adds that text
            # to the pod's message; kubesched answers "nothing to deallocate" instead, so the
            # message stays the PreFilter's (README: differences from upstream).
            return None, Status.unschedulable()
        if not s.claims:
            return None, Status.unschedulable()
        extended = s.claims[s.extended] if s.extended is not None else None
        written = extended is not None and not is_special(extended)
        for index in sorted(s.unavailable):
            claim = s.claims[index]
            if index == s.extended:
                if written:
                    break  # deleted below
                continue
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                client = self.handle.client
                if not isinstance(client, StatusWriter):
                    return None, Status.error("deallocating a claim: this shell's client cannot update ResourceClaims")
                status = {k: v for k, v in (claim.get("status") or {}).items()
                          if k not in ("reservedFor", "allocation", "devices")}
                if not self._in_background(client.update_object_status(RESOURCE_CLAIM, {**claim, "status": status})):
                    return None, Status.error("deallocating a claim: no event loop to send the update from")
                return None, Status.unschedulable("deallocation of ResourceClaim completed")
        if extended is not None and written:
            # The extended resource claim an earlier attempt created: deleted, the next attempt
            # starts anew (its deletion is the event that brings the pod back).
            if not self._in_background(delete_claim(self.handle.client, extended, self.manager.claim)):
                return None, Status.error("deleting a claim: no event loop to send the update from")
            return None, Status.unschedulable("deletion of ResourceClaim completed")
        return None, Status.unschedulable()

    def _in_background(self, write: Coroutine[Any, Any, Any]) -> bool:
        """Send a claim write now and await it in the background (kept referenced until done);
        False without a running event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            write.close()
            return False
        task = loop.create_task(write)
        self._deallocations.add(task)
        task.add_done_callback(self._deallocations.discard)
        return True
