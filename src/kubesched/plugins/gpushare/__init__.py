from kubesched.plugins.gpushare.args import GpuShareArgs
from kubesched.plugins.gpushare.ledger import GpuLedger
from kubesched.plugins.gpushare.model import GpuAnnotationError, GpuRequest, parse_gpu_request
from kubesched.plugins.gpushare.plugin import GpuChooser, GpuShare, PodAnnotator

__all__ = [
    "GpuAnnotationError",
    "GpuChooser",
    "GpuLedger",
    "GpuRequest",
    "GpuShare",
    "GpuShareArgs",
    "PodAnnotator",
    "parse_gpu_request",
]
