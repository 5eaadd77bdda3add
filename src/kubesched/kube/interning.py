"""One copy of each repeated string in the objects informers keep (issue 32 item 3).

An informer keeps every pod and node as the dict ``orjson`` decoded, and ``orjson`` makes a new
``str`` for every string value (it shares only short dict keys). Most of a pod's values repeat
across pods: the image, ``IfNotPresent``, ``100m``, ``/dev/termination-log``, ``ClusterFirst``, the
default tolerations, condition types and statuses, the namespace, the node name, label values,
the topology keys and selectors of its affinity and spread terms. Interning them
(``sys.intern``) keeps one object per distinct value: a bound pod of scheduler_perf's shapes as
the apiserver sends it (managedFields dropped) goes from ~9.5 to ~6.4 KB, a KWOK node from
~7.4 to ~4.2 KB (bench/live_memory.py; BENCHMARKS.md "Memory per node and per pod"). It costs
~20 µs of CPU a pod, about what orjson takes to decode it. Strings are immutable, so nothing a consumer reads
changes; interned strings are freed with their last user, so a value seen once is not kept.
kube-scheduler needs no such step: its Go decoder makes a string header per value pointing into
one buffer per object, a fraction of a Python ``str``.
"""

from __future__ import annotations

import sys
from typing import Any


def intern_strings(obj: dict[str, Any] | list[Any]) -> None:
    """Replace every string value in ``obj`` (nested dicts and lists, in place) by its interned
    copy. Keys are left alone (orjson already shares them)."""
    intern = sys.intern
    stack: list[dict[str, Any] | list[Any]] = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                t = type(v)
                if t is str:
                    node[k] = intern(v)
                elif t is dict or t is list:
                    stack.append(v)
        else:
            for i, item in enumerate(node):
                t = type(item)
                if t is str:
                    node[i] = intern(item)
                elif t is dict or t is list:
                    stack.append(item)
