"""What the Coscheduling tests share: a PodGroup object and a profile that runs Coscheduling alone."""

from __future__ import annotations

from typing import Any


def pod_group(name: str, min_member: int, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    """A scheduling.x-k8s.io/v1alpha1 PodGroup in namespace default."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}", "creationTimestamp": created},
        "spec": {"minMember": min_member, **spec},
    }


def coscheduling_config(scheduler_name: str = "default-scheduler", args: str = "") -> str:
    """A KubeSchedulerConfiguration whose profile runs Coscheduling at every point it implements
    (its own QueueSort; the default plugins off), with ``args`` (a YAML flow mapping) if given."""
    config = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {scheduler_name}
  plugins:
    queueSort:
      enabled: [{{name: Coscheduling}}]
      disabled: [{{name: "*"}}]
    preFilter: {{enabled: [{{name: Coscheduling}}]}}
    postFilter: {{enabled: [{{name: Coscheduling}}]}}
    permit: {{enabled: [{{name: Coscheduling}}]}}
    reserve: {{enabled: [{{name: Coscheduling}}]}}
"""
    if args:
        config += f"""  pluginConfig:
  - name: Coscheduling
    args: {args}
"""
    return config
