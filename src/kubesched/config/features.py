"""Feature gates kubesched honours, by upstream's names, and their v1.37 defaults.

kube-scheduler takes gates on its command line (``--feature-gates=GenericWorkload=true``);
kubesched reads them from the configuration file's ``featureGates`` map (a kubesched field, not
upstream's: a file is what every shell — live, simulator, extender — loads). A gate changes what
upstream's gate changes: ``GenericWorkload`` adds GangScheduling to the default plugins
(pkg/scheduler/apis/config/v1/default_plugins.go ``applyFeatureGates``);
``TopologyAwareWorkloadScheduling`` (alpha) adds TopologyPlacementGenerator and PodGroupPodsCount
and makes the PodGroup cycle try each placement they generate; ``CompositePodGroup`` (alpha)
schedules a hierarchy of groups as one entity (scheduler_composite.py) and needs both others on, as
upstream's gate dependencies say; ``PodGroupPreemptionPolicy`` (alpha, needs GenericWorkload) makes a
group's ``spec.preemptionPolicy`` its policy: its pods must have it (validatePodGroup) and group
preemption reads it (framework/preemption_podgroup.py); ``OpportunisticBatching`` (beta, on)
offers a pod the previous identical pod's next-best node first (framework/batch.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kubesched.framework.batch import OPPORTUNISTIC_BATCHING as OPPORTUNISTIC_BATCHING
from kubesched.framework.podgroup import COMPOSITE_POD_GROUP as COMPOSITE_POD_GROUP
from kubesched.framework.podgroup import GENERIC_WORKLOAD as GENERIC_WORKLOAD
from kubesched.framework.podgroup import POD_GROUP_PREEMPTION_POLICY as POD_GROUP_PREEMPTION_POLICY
from kubesched.framework.podgroup import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING as TOPOLOGY_AWARE_WORKLOAD_SCHEDULING

#: Gate → its default in Kubernetes v1.37 (pkg/features/kube_features.go): GenericWorkload is beta
#: and off by default; OpportunisticBatching is beta and on.
KNOWN_GATES: Final[Mapping[str, bool]] = {
    GENERIC_WORKLOAD: False, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: False, COMPOSITE_POD_GROUP: False,
    POD_GROUP_PREEMPTION_POLICY: False, OPPORTUNISTIC_BATCHING: True,
}
#: Gate → the gates it needs on (kube_features.go defaultKubernetesFeatureGateDependencies).
GATE_DEPENDENCIES: Final[Mapping[str, tuple[str, ...]]] = {
    COMPOSITE_POD_GROUP: (GENERIC_WORKLOAD, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING),
    POD_GROUP_PREEMPTION_POLICY: (GENERIC_WORKLOAD,),
}


def unknown_gate_errors(gates: Mapping[str, bool]) -> list[str]:
    """One line per gate kubesched does not know (component-base's ``unrecognized feature gate``)."""
    known = ", ".join(sorted(KNOWN_GATES))
    return [
        f"featureGates.{name}: unrecognized feature gate: {name} (kubesched knows: {known})"
        for name in gates
        if name not in KNOWN_GATES
    ]


def dependency_errors(gates: Mapping[str, bool]) -> list[str]:
    """component-base's ``X is enabled, but depends on features that are disabled: [A B]``."""
    effective = effective_gates(gates)
    errors = []
    for gate, deps in GATE_DEPENDENCIES.items():
        off = [d for d in deps if not effective.get(d)]
        if effective.get(gate) and off:
            errors.append(f"featureGates.{gate}: {gate} is enabled, but depends on features that are disabled: "
                          f"[{' '.join(off)}]")
    return errors


def effective_gates(gates: Mapping[str, bool]) -> dict[str, bool]:
    """Every known gate with the configuration's value or its default."""
    return {name: bool(gates.get(name, default)) for name, default in KNOWN_GATES.items()}
