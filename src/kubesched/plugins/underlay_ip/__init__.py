from kubesched.plugins.underlay_ip.args import UnderlayIPArgs
from kubesched.plugins.underlay_ip.plugin import UnderlayIP

__all__ = ["UnderlayIP", "UnderlayIPArgs"]
