"""The preempt verb's judgement: the profile's own preemption on each candidate node, through the
code DefaultPreemption runs (``framework.preemption.select_victims_on_node``). kube-scheduler's
victims are taken off (its filters need them gone), then the fewest more lower-priority pods the
profile's filters need gone too (PDB-violating ones spared first, priorities and budgets from the
profile's preemption plugin when it has one); nodes where the pod would still not fit are dropped.
The answer is always ``NodeNameToMetaVictims`` (UIDs), as upstream expects.

Synchronous: the victims are taken off the (possibly live) table and put back within the call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubesched.extender.requests import Deadline, Reply, ServiceError
from kubesched.extender.wire import NodeVictims, PreemptionArgs, WireError, encode_preemption_result
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.preemption import select_victims_on_node, victim_policy
from kubesched.framework.preemption_order import PodDisruptionBudget
from kubesched.framework.runtime import Framework, plugin_error
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable


def preempt_reply(
    args: PreemptionArgs, pod: PodInfo, table: NodeTable, fwk: Framework, deadline: Deadline
) -> Reply:
    """The answer to ``args`` for ``pod``, judged on ``table`` by ``fwk``."""
    unknown = [n for n in args.victims if table.row_of(n) is None]
    if unknown and args.meta:
        shown = ", ".join(sorted(unknown)[:10])
        raise WireError(
            f"NodeNameToMetaVictims: {len(unknown)} node(s) unknown to the extender's node cache: {shown}"
        )
    state = CycleState()
    _, st = fwk.run_pre_filter(state, pod)
    if st.is_error:
        raise ServiceError(500, plugin_error("PreFilter", st))
    if st.is_rejected:
        # The profile rejects the pod before looking at nodes: no eviction makes it fit.
        return Reply(200, encode_preemption_result({}))
    priority, pdbs = victim_policy(fwk)
    kept: dict[str, NodeVictims] = {}
    for name, victims in args.victims.items():
        row = table.row_of(name)
        if row is None:
            # Never seen (nodeCacheCapable: false, no cluster): nothing to judge it by, keep it.
            kept[name] = victims
            continue
        answer = victims_on_node(fwk, table, state, pod, row, victims, priority, pdbs)
        if answer is not None:
            kept[name] = answer
        deadline.check("preempt")
    return Reply(200, encode_preemption_result(kept))


def victims_on_node(
    fwk: Framework, table: NodeTable, state: CycleState, pod: PodInfo, row: int, victims: NodeVictims,
    priority: Callable[[PodInfo], int], pdbs: Sequence[PodDisruptionBudget],
) -> NodeVictims | None:
    """The victims on ``row`` by the profile's own preemption (``select_victims_on_node``, as
    DefaultPreemption runs it): kube-scheduler's victims always go (its filters need them gone),
    plus the fewest lower-priority pods this profile's filters need gone too; None when the pod
    does not fit even then. Victims the extender's cache does not hold are kept as given."""
    on_node = table.pods[row]
    required = [on_node[u] for u in victims.uids if u in on_node]
    chosen, violations, st = select_victims_on_node(
        fwk, table, state.clone(), pod, row, pdbs, priority, required=required
    )
    if st.is_error:
        raise ServiceError(500, st.message)
    if not st.is_success:
        return None
    extra = tuple(v.uid for v in chosen[len(required):])
    return NodeVictims(victims.uids + extra, victims.num_pdb_violations + violations)
