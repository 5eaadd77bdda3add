from kubesched.plugins.priority_sort.plugin import PrioritySort

__all__ = ["PrioritySort"]
