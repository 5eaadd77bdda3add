from kubesched.plugins.node_affinity.args import NodeAffinityArgs
from kubesched.plugins.node_affinity.plugin import NodeAffinity

__all__ = ["NodeAffinity", "NodeAffinityArgs"]
