"""The live shell: kubesched as a second scheduler in a real cluster (``kubesched run``/``explain``).

Modules: ``api`` (connection, raw-JSON requests, QPS limiter), ``informer`` (list+watch, relist and
reconcile on 410), ``client`` (binding), ``events`` (Events and the PodScheduled condition, off the
scheduling path), ``leader`` (Lease election), ``metrics``, ``health``, ``logs``, ``runner`` (the
main loop), ``explain`` and ``commands`` (the CLI).
"""
