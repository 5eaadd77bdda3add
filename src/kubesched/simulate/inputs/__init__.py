"""What the simulator is given: cluster dumps (``dump``, read through ``yaml_documents``), synthetic
clusters (``generator`` with the pod shapes of ``workload_shapes``), what-if workloads (``workload``)
and kubectl-style label selectors (``selector``). The lowest floor of ``simulate``: it imports
nothing else of it."""
