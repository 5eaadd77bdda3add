"""Score: prefer the node where a prioritized list got an earlier subrequest.

Port of pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go ``computeScore``
(Kubernetes v1.37.1): per claim, every ``firstAvailable`` subrequest in the allocation adds
``FirstAvailableDeviceRequestMaxSize - i`` (``i`` its index in the list); a claim allocated before
this cycle counts with its stored allocation, the others with the node's trial allocation, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.plugins.dynamicresources.claims import allocation

#: resourceapi.FirstAvailableDeviceRequestMaxSize
FIRST_AVAILABLE_MAX_SIZE = 8


class ScoreError(Exception):
    """The node's allocations do not match the pod's claims (upstream: an error status)."""


def compute_score(claims: Sequence[Mapping[str, Any]], node_allocations: Sequence[Mapping[str, Any]]) -> int:
    """The node's score for these claims (``node_allocations``: one per unallocated claim)."""
    score = 0
    unallocated = 0
    for claim in claims:
        alloc: Mapping[str, Any] | None = allocation(claim)
        if alloc is None:
            if unallocated >= len(node_allocations):
                raise ScoreError(f"number of allocations {len(node_allocations)} is smaller than number of "
                                 "claims needing allocation")
            alloc = node_allocations[unallocated]
            unallocated += 1
        allocated_subrequests = {str(r.get("request", "")) for r in (alloc.get("devices") or {}).get("results") or []
                                 if "/" in str(r.get("request", ""))}
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            if req.get("exactly") is not None:
                continue
            for i, sub in enumerate(req.get("firstAvailable") or []):
                if f"{req.get('name', '')}/{sub.get('name', '')}" in allocated_subrequests:
                    score += FIRST_AVAILABLE_MAX_SIZE - i
    return score
