"""The Priority admission plugin, for pods that never went through an apiserver.

On a real cluster the apiserver's Priority admission plugin (plugin/pkg/admission/priority/
admission.go, Kubernetes v1.37.1) fills ``spec.priority`` and ``spec.preemptionPolicy`` from the
pod's PriorityClass before the scheduler ever sees the pod, so every scheduler component
(the queue's PrioritySort, the nominated-pods check, DefaultPreemption) reads ``spec.priority``
alone (upstream ``corev1helpers.PodPriority``). Hand-written simulator inputs and generated pods
skip that step; the simulator runs :func:`admit_priority` on each of them instead, so kubesched
reads one priority everywhere, as kube-scheduler does.

Rules, as upstream:

* ``priorityClassName`` set: the class must exist (the built-in ``system-node-critical`` and
  ``system-cluster-critical`` always do); its ``value`` and ``preemptionPolicy`` are copied.
* no ``priorityClassName``: the ``globalDefault`` class (the lowest value if several claim it,
  as upstream's ``getDefaultPriorityClass``) gives name, value and policy; without one, priority 0
  and ``PreemptLowerPriority``.
* a pod that already carries ``spec.priority`` (every pod of a dump of a real cluster) is admitted
  only if it agrees with its class, as the apiserver checks.

One leniency, on purpose: a pod that names no class while the input has no ``globalDefault``
class keeps the ``priority`` and ``preemptionPolicy`` it carries (the apiserver would insist on 0
and ``PreemptLowerPriority``) — hand-written what-if inputs say "priority: 1000" without writing a
PriorityClass, and refusing them would help nobody.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The PriorityClasses every apiserver creates (pkg/apis/scheduling: SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"


class AdmissionError(ValueError):
    """A pod the apiserver's Priority admission plugin would refuse (the message names the field)."""


def _default_class(classes: Mapping[str, Mapping[str, Any]]) -> tuple[str, int, str] | None:
    defaults = [
        (int(pc.get("value") or 0), name, str(pc.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY))
        for name, pc in classes.items()
        if pc.get("globalDefault")
    ]
    if not defaults:
        return None
    value, name, policy = min(defaults)
    return name, value, policy


def admit_priority(pod: dict[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> None:
    """Fill ``spec.priority``/``spec.preemptionPolicy`` of ``pod`` in place from ``classes``
    (PriorityClass objects by name); raise :class:`AdmissionError` where the apiserver would refuse."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    name = spec.get("priorityClassName")
    given = spec.get("priority")
    if name:
        pc = classes.get(str(name))
        if pc is not None:
            value, policy = int(pc.get("value") or 0), str(pc.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
        elif str(name) in SYSTEM_PRIORITY_CLASSES:
            value, policy = SYSTEM_PRIORITY_CLASSES[str(name)], PREEMPT_LOWER_PRIORITY
        else:
            raise AdmissionError(
                f"spec.priorityClassName: no PriorityClass with name {name} was found "
                "(add the PriorityClass to the input, or drop the field)"
            )
    else:
        default = _default_class(classes)
        if default is None:
            # No class and no default: 0, unless the input already says (kubesched's own inputs).
            spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
            return
        name, value, policy = default
        spec["priorityClassName"] = name
    if given is not None and given != value:
        raise AdmissionError(
            f"spec.priority: the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name"
        )
    current_policy = spec.get("preemptionPolicy")
    if current_policy is not None and current_policy != policy:
        raise AdmissionError(
            f"spec.preemptionPolicy: the string value of PreemptionPolicy ({current_policy}) must not be "
            f"provided in pod spec; priority admission controller computed {policy} from the given "
            "PriorityClass name"
        )
    spec["priority"] = value
    spec["preemptionPolicy"] = policy


__all__ = ["PREEMPT_LOWER_PRIORITY", "SYSTEM_PRIORITY_CLASSES", "AdmissionError", "admit_priority"]
