"""Building a cluster in memory without the cyclic garbage collector.

Generating or loading 5,000 nodes and 10,000 pods allocates hundreds of thousands of small dicts
and objects, none of them garbage; with the collector on, each allocation burst triggers
collections that scan them again and again (a third of the generator's time). They are built with
the collector paused, and the caller may ``gc.freeze()`` them afterwards. While a simulation
schedules, the young generation is collected less often (``fewer_young_collections``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic GC off inside the block (reference counting still frees everything at once);
    restored to how it was, so nesting and a caller that disabled it stay as they were.

    ``freeze``: ``gc.freeze()`` on the way out, before the collector is back on, for a caller that
    keeps what it built to the end. Everything allocated while paused sits in the youngest
    generation, so the first collection after ``gc.enable()`` would scan all of it (and later
    collections of the older generations again); frozen, it is never scanned."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


#: The young generation's threshold while a simulation schedules (CPython's default is 700
#: allocations; the extender serves with the same, extender/server.py ``SERVING_GC_THRESHOLD``).
SIMULATION_GC_THRESHOLD = 20_000


@contextmanager
def fewer_young_collections(threshold: int = SIMULATION_GC_THRESHOLD) -> Iterator[None]:
    """The young generation collected every ``threshold`` allocations inside the block (never
    more often than it was), restored on the way out. A simulation's pods, records and statuses
    mostly live to the end: at CPython's default a collection ran every few pods and walked the
    survivors (the openb GPU replay: 712 young, 65 middle and 6 full collections, ~3.5 % of its
    CPU; 153, 14 and 1 at 20,000, half the time). Garbage cycles are still collected, later."""
    old = gc.get_threshold()
    # 0: automatic collection is off, and stays off
    gc.set_threshold(max(threshold, old[0]) if old[0] else 0, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
