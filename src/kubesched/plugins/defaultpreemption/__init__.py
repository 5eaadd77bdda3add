from kubesched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from kubesched.plugins.defaultpreemption.plugin import DefaultPreemption

__all__ = ["DefaultPreemption", "DefaultPreemptionArgs"]
