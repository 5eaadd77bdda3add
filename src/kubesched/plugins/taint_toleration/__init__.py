from kubesched.plugins.taint_toleration.plugin import TaintToleration

__all__ = ["TaintToleration"]
