"""The simulator's engine: the virtual-time loop (``runner.Simulation``), the in-memory apiserver it
binds through (``cluster.SimulatedCluster``, with the PersistentVolume controller of ``volumes``) and
what it remembers about each pod (``records``). It reads inputs and knows nothing of reports."""
