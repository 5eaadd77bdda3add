"""The questions asked of a cluster, each answered by running the engine: drain a set of nodes
(``drain``, with PodDisruptionBudgets in ``drain_budget``), how many nodes or pods fit
(``capacity``), two configurations side by side (``compare``) and parameter sweeps (``sweep``, run by
local workers through ``sweep_files`` or on a Dask cluster through ``sweep_dask``)."""
