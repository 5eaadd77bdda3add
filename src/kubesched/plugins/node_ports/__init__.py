from kubesched.plugins.node_ports.plugin import NodePorts

__all__ = ["NodePorts"]
