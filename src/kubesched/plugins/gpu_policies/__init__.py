"""The six GPU scheduling policies of the FGD paper as Score plugins (see README.md)."""

from kubesched.plugins.gpu_policies.best_fit import BestFit
from kubesched.plugins.gpu_policies.dot_product import DotProduct
from kubesched.plugins.gpu_policies.fgd import FGD, FGDArgs
from kubesched.plugins.gpu_policies.gpu_clustering import GpuClustering
from kubesched.plugins.gpu_policies.gpu_packing import GpuPacking
from kubesched.plugins.gpu_policies.random_fit import RandomFit
from kubesched.snapshot.gpushare.typical_pods import TypicalPod, typical_pods

POLICIES = (FGD, BestFit, DotProduct, GpuPacking, GpuClustering, RandomFit)

__all__ = [
    "FGD",
    "POLICIES",
    "BestFit",
    "DotProduct",
    "FGDArgs",
    "GpuClustering",
    "GpuPacking",
    "RandomFit",
    "TypicalPod",
    "typical_pods",
]
