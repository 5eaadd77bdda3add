from kubesched.plugins.node_unschedulable.plugin import NodeUnschedulable

__all__ = ["NodeUnschedulable"]
