from kubesched.plugins.real_usage.args import MemRealUsageArgs, RealUsageArgs
from kubesched.plugins.real_usage.plugin import MemRealUsage, RealUsage

__all__ = ["MemRealUsage", "MemRealUsageArgs", "RealUsage", "RealUsageArgs"]
