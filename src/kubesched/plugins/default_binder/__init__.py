from kubesched.plugins.default_binder.plugin import DefaultBinder

__all__ = ["DefaultBinder"]
