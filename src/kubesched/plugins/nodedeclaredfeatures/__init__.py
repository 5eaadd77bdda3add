from kubesched.plugins.nodedeclaredfeatures.features import FEATURES, infer_for_scheduling
from kubesched.plugins.nodedeclaredfeatures.plugin import ERR_REASON_UNSATISFIED_REQUIREMENTS, NodeDeclaredFeatures

__all__ = ["ERR_REASON_UNSATISFIED_REQUIREMENTS", "FEATURES", "NodeDeclaredFeatures", "infer_for_scheduling"]
