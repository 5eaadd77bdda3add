"""PodGroupPodsCount: placements that fit more of a PodGroup score higher (alpha,
TopologyAwareWorkloadScheduling)."""

from kubesched.plugins.podgrouppodscount.plugin import NAME, PodGroupPodsCount

__all__ = ["NAME", "PodGroupPodsCount"]
