"""Node resources plugins: NodeResourcesFit and NodeResourcesBalancedAllocation (see README.md)."""

from kubesched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs
from kubesched.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from kubesched.plugins.noderesources.fit import NodeResourcesFit

__all__ = [
    "NodeResourcesBalancedAllocation",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
]
