from kubesched.plugins.node_name.plugin import NodeName

__all__ = ["NodeName"]
