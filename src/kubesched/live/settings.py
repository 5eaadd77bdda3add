"""``kubesched run``'s settings: the command-line options of a live run, the run's counters, and
which Lease it holds (kept apart from the runner so the command and tests read them without the
runner's informers and clients)."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubesched.live.leader import default_identity

if TYPE_CHECKING:  # not imported at run time: `kubesched run` starts its informers before the framework is imported
    from kubesched.backend.host_selection import TieBreak
    from kubesched.framework.objects import ObjectKind

#: The lease name used when leaderElection.resourceName is the upstream default ("kube-scheduler"):
#: sharing the default scheduler's lease would make this one a standby forever. --lease-name forces
#: any name.
DEFAULT_LEASE_NAME = "kubesched"
UPSTREAM_LEASE_NAME = "kube-scheduler"

EXIT_OK = 0
#: The Lease was lost: scheduling stopped at once (kube-scheduler exits too; the pod restarts).
EXIT_LOST_LEASE = 1
EXIT_CONFLICT = 2


def lease_name_for(resource_name: str, override: str | None = None) -> str:
    """The Lease to hold: ``--lease-name``, else leaderElection.resourceName with upstream's default
    (kube-scheduler's own Lease) replaced by kubesched's."""
    if override:
        return override
    return DEFAULT_LEASE_NAME if resource_name == UPSTREAM_LEASE_NAME else resource_name


@dataclass
class LiveOptions:
    health_addr: str = "127.0.0.1:10251"
    #: The kubeconfig context to use (``--context``; None: its current-context).
    context: str | None = None
    leader_elect: bool | None = None  # None: from the configuration
    identity: str = field(default_factory=default_identity)
    lease_name: str | None = None
    #: Pods scheduled between two yields to the event loop ...
    yield_every: int = 32
    #: ... or seconds of scheduling cycles, whichever comes first: 32 slow cycles (DynamicResources'
    #: CEL under load: ~0.5 s each) held the loop ~28 s, and PreBind's claim writes timed out.
    yield_after: float = 0.05
    #: Binds waiting on the apiserver before the loop pauses: beyond the API client's connection
    #: pool they only queue (and hold memory), and the attempt latency would mostly be that queue.
    max_binds_in_flight: int = 512
    drain_timeout: float = 30.0
    event_interval: float = 30.0
    #: Objects to watch besides those the configured plugins declare (framework/objects.py).
    extra_object_kinds: tuple[ObjectKind, ...] = ()
    watch_read_timeout: float = 150.0
    install_signal_handlers: bool = True
    #: Run a ``default-scheduler`` profile even while kube-scheduler holds its Lease (it is being
    #: replaced); otherwise that is refused: both would schedule the same pods.
    replace_default_scheduler: bool = False
    #: Log the traceback of each distinct plugin error (``--debug`` / KUBESCHED_DEBUG=1).
    debug: bool = False
    #: /readyz turns 503 once an informer has been cut off from the apiserver this long (its cache,
    #: and so every placement, may be stale), /healthz 500 past the second figure (a restart gets
    #: fresh connections); /healthz also fails when the leader's scheduling loop has not turned for
    #: ``loop_stall_seconds`` (it wakes at least every second by design; waiting on binds counts
    #: as turning).
    informer_stale_seconds: float = 60.0
    informer_dead_seconds: float = 300.0
    loop_stall_seconds: float = 30.0
    #: The process is this run's own (``kubesched run``, not a test running a LiveScheduler in its
    #: process): the command turned the cyclic garbage collector off for the start-up, and the
    #: runner turns it back on once the informers are synced (``end_startup_gc``).
    owns_process_gc: bool = False
    #: How a pod picks among the nodes with the same highest score (``--tie-break``; upstream's
    #: ``selectHost`` is ``random``).
    tie_break: TieBreak = "random"


def end_startup_gc() -> None:
    """Turn the cyclic garbage collector back on after a start-up without it, with every object
    allocated so far frozen out of its scans (``gc.freeze``).

    A start-up allocates a few hundred thousand long-lived objects (the modules imported, then the
    informers' caches: every Node and Pod as JSON dicts, and their PodInfos) and next to no garbage
    cycles: a collector running meanwhile only scans them again and again (on the openb trace's
    8,152 pods: ~40 % of decoding and queueing them, ~14 % of the imports). Frozen, they are still
    freed by reference counting when replaced or deleted (a bound pod's new version, a deleted
    node); only a reference cycle among them would stay: the informers' JSON makes none, and the
    few cycles the start-up's own requests left are not collected first (a full collection over
    the openb trace's objects costs ~0.1 s, which the first bind would wait for). Nothing happens
    when the collector is on already."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


@dataclass
class RunStats:
    attempts: int = 0
    scheduled: int = 0
    failed: int = 0
    bound: int = 0
    first_bound_at: float = 0.0
    last_bound_at: float = 0.0
    synced_at: float = 0.0
    leader_at: float = 0.0
    #: The longest the event loop was kept from running a due timer (kubesched_event_loop_lag_seconds).
    max_loop_lag: float = 0.0
