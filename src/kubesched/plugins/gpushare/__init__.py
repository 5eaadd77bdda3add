from kubesched.plugins.gpushare.args import GpuShareArgs
from kubesched.plugins.gpushare.plugin import GpuChooser, GpuShare
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import GpuAnnotationError, GpuRequest, parse_gpu_request

__all__ = [
    "GpuAnnotationError",
    "GpuChooser",
    "GpuLedger",
    "GpuRequest",
    "GpuShare",
    "GpuShareArgs",
    "parse_gpu_request",
]
