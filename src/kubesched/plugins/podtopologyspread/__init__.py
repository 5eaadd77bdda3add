from kubesched.plugins.podtopologyspread.args import PodTopologySpreadArgs
from kubesched.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["PodTopologySpread", "PodTopologySpreadArgs"]
