"""DomainCap — an example out-of-tree kubesched plugin.

At most ``maxPods`` pods matching ``podSelector`` per *topology domain* — the set of nodes that
share a value of the ``topologyKey`` label (a zone, a rack, a power feed) — and, among the domains
with room, prefer the one with the fewest such pods. Use it for a per-zone software licence count,
a per-rack power or cooling budget, or "never more than two replicas of the database in one zone".

============  ===============================================================================
point         what it does
============  ===============================================================================
PreFilter     ``Skip`` for pods the selector does not match (their Filter is not run); else
              count the selected pods per domain once, into CycleState
Filter        batch form: rejects nodes whose domain is full — ``node(s) were in a topology
              domain that reached its pod cap`` (Unschedulable: deleting a pod frees a slot) —
              and, with ``nodesWithoutKey: Reject``, nodes without the label — ``node(s) didn't
              have label <key>`` (UnschedulableAndUnresolvable: no pod removal helps)
PreScore      ``Skip`` for pods the selector does not match
Score         per-node form: selected pods already in the node's domain; NormalizeScore maps
              them to 0–100, emptiest domain highest (nodes without the label score lowest)
============  ===============================================================================

Args (``pluginConfig``, camelCase; unknown keys are errors):

* ``maxPods`` (required, 1–1,000,000) — the cap per domain;
* ``podSelector`` (required) — a label selector (``matchLabels`` / ``matchExpressions``); ``{}``
  selects every pod;
* ``topologyKey`` (default ``topology.kubernetes.io/zone``) — must be a valid label key;
* ``nodesWithoutKey`` (``Reject`` | ``Ignore``, default ``Reject``).

The count covers every selected pod on the node, whichever scheduler placed it, and stays exact
through assumed, bound, failed and deleted pods and scheduler restarts (a node-table pod column).

Enable it (``config.yaml`` next to this file)::

    PYTHONPATH=examples/plugins kubesched simulate --plugins domain_cap \\
        --config examples/plugins/domain_cap/config.yaml --cluster examples/plugins/domain_cap/cluster.yaml

or from Python — see ``docs/plugins.md`` and ``tests/unit/test_example_plugin.py``.
"""

from .args import DomainCapArgs
from .plugin import DomainCap

#: What ``kubesched ... --plugins domain_cap`` registers.
PLUGINS = [DomainCap]

__all__ = ["PLUGINS", "DomainCap", "DomainCapArgs"]
