"""Feature gates kubesched honours, by upstream's names, and their v1.37 defaults.

kube-scheduler takes gates on its command line (``--feature-gates=GenericWorkload=true``);
kubesched reads them from the configuration file's ``featureGates`` map (a kubesched field, not
upstream's: a file is what every shell — live, simulator, extender — loads). A gate changes what
upstream's gate changes: ``GenericWorkload`` adds GangScheduling to the default plugins
(pkg/scheduler/apis/config/v1/default_plugins.go ``applyFeatureGates``);
``TopologyAwareWorkloadScheduling`` (alpha) adds TopologyPlacementGenerator and PodGroupPodsCount
and makes the PodGroup cycle try each placement they generate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kubesched.framework.podgroup import GENERIC_WORKLOAD as GENERIC_WORKLOAD
from kubesched.framework.podgroup import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING as TOPOLOGY_AWARE_WORKLOAD_SCHEDULING

#: Gate → its default in Kubernetes v1.37 (pkg/features/kube_features.go): GenericWorkload is beta
#: and off by default.
KNOWN_GATES: Final[Mapping[str, bool]] = {GENERIC_WORKLOAD: False, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: False}


def unknown_gate_errors(gates: Mapping[str, bool]) -> list[str]:
    """One line per gate kubesched does not know (component-base's ``unrecognized feature gate``)."""
    known = ", ".join(sorted(KNOWN_GATES))
    return [
        f"featureGates.{name}: unrecognized feature gate: {name} (kubesched knows: {known})"
        for name in gates
        if name not in KNOWN_GATES
    ]


def effective_gates(gates: Mapping[str, bool]) -> dict[str, bool]:
    """Every known gate with the configuration's value or its default."""
    return {name: bool(gates.get(name, default)) for name, default in KNOWN_GATES.items()}
