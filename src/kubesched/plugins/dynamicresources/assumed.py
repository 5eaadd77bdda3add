"""The claims as the scheduler sees them: the shell's, with PreBind's writes until it catches up.

Port of the assume cache behind pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go
``claimTracker`` (v1.37.1, ``AssumeClaimAfterAPICall``): a claim PreBind wrote is what the next pods
see until the shell's copy is as new (resourceVersions compared as numbers). A claim PreBind created
(the claim for DRA-backed extended resources) is kept until the shell has it at all, as upstream's
PreBind waits for the informer (``waitForExtendedClaimInAssumeCache``) before it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.plugins.dynamicresources.claims import claim_key, resource_version


class AssumedClaims:
    def __init__(self, shell: Callable[[], Mapping[str, dict[str, Any]]]) -> None:
        #: The shell's claims by key (``handle.objects``).
        self._shell = shell
        #: claim key -> the claim as PreBind wrote it.
        self._assumed: dict[str, dict[str, Any]] = {}
        #: Keys of claims PreBind created, not yet seen in the shell.
        self._created: set[str] = set()

    def assume(self, written: dict[str, Any], created: bool = False) -> None:
        key = claim_key(written)
        self._assumed[key] = written
        if created:
            self._created.add(key)

    def all(self) -> dict[str, dict[str, Any]]:
        """Every claim by key, PreBind's writes first while the shell has not caught up."""
        out = dict(self._shell())
        for key in list(self._assumed):
            claim = self.get(key)
            if claim is not None:
                out[key] = claim
        return out

    def get(self, key: str) -> dict[str, Any] | None:
        written = self._assumed.get(key)
        latest = self._shell().get(key)
        if written is None:
            return latest
        if latest is None and key in self._created:
            return written  # created by PreBind, not in the shell yet
        self._created.discard(key)
        if latest is None or _newer_or_same(latest, written):
            del self._assumed[key]
            return latest
        return written


def _newer_or_same(latest: Mapping[str, Any], written: Mapping[str, Any]) -> bool:
    """Whether the shell's copy has caught up with what PreBind wrote (resourceVersions compared as
    numbers, as upstream's assume cache does; otherwise: equal means caught up)."""
    a, b = resource_version(latest), resource_version(written)
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return a == b
