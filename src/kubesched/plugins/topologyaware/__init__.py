"""TopologyPlacementGenerator: a PodGroup placed within one topology domain (alpha,
TopologyAwareWorkloadScheduling)."""

from kubesched.plugins.topologyaware.plugin import NAME, TopologyPlacementGenerator

__all__ = ["NAME", "TopologyPlacementGenerator"]
