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

Admission runs once, when a pod is created; a pod that already carries ``spec.priority`` went
through it (every pod of ``kubectl get pods -o yaml``) and keeps what it carries, as kube-scheduler
reads it: its class need not be in the input (``kubectl get pods`` never lists PriorityClasses),
and a class whose value changed since (classes can be deleted and recreated) does not change it.
:func:`carried_priority_note` says when the class does not account for the number, so the
simulator can warn. Only ``preemptionPolicy``, when missing, is filled (from the class if the
input has it, else ``PreemptLowerPriority``, what the scheduler assumes for an unset policy).

One leniency follows from that, on purpose: a hand-written pod that says ``priority: 1000``
without a PriorityClass keeps it (the apiserver would refuse to create it); refusing such what-if
inputs would help nobody.
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
    if spec.get("priority") is not None:  # admitted when it was created: kept as it is
        if spec.get("preemptionPolicy") is None:
            pc = classes.get(str(name)) if name else None
            spec["preemptionPolicy"] = str((pc or {}).get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
        return
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
            spec["priority"] = 0
            spec.setdefault("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
            return
        name, value, policy = default
        spec["priorityClassName"] = name
    current_policy = spec.get("preemptionPolicy")
    if current_policy is not None and current_policy != policy:
        raise AdmissionError(
            f"spec.preemptionPolicy: the string value of PreemptionPolicy ({current_policy}) must not be "
            f"provided in pod spec; priority admission controller computed {policy} from the given "
            "PriorityClass name"
        )
    spec["priority"] = value
    spec["preemptionPolicy"] = policy


def carried_priority_note(spec: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """For a pod that carried ``spec.priority`` into :func:`admit_priority`: why its
    ``priorityClassName`` does not account for that number (the class is not in ``classes``, or
    gives another value), as the end of a warning; None when it does, or names no class."""
    name = spec.get("priorityClassName")
    if not name or (str(name) in SYSTEM_PRIORITY_CLASSES and str(name) not in classes):
        return None
    pc = classes.get(str(name))
    if pc is None:
        return f"spec.priorityClassName: no PriorityClass with name {name} in the input"
    value = int(pc.get("value") or 0)
    if spec.get("priority") != value:
        return f"spec.priority {spec.get('priority')} is not PriorityClass {name}'s value {value}"
    return None


__all__ = [
    "PREEMPT_LOWER_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "AdmissionError",
    "admit_priority",
    "carried_priority_note",
]
