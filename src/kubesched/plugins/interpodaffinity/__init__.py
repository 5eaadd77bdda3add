from kubesched.plugins.interpodaffinity.args import InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = ["InterPodAffinity", "InterPodAffinityArgs"]
