"""DynamicResources: Dynamic Resource Allocation with structured parameters (see plugin.py)."""

from kubesched.plugins.dynamicresources.plugin import DynamicResources

__all__ = ["DynamicResources"]
