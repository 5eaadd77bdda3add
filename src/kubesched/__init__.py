"""kubesched: custom Kubernetes scheduling in Python.

One framework core (the kube-scheduler Scheduling Framework) run by three shells: a live second
scheduler, a scheduler extender and a simulator.
"""

__version__ = "0.1.0"
