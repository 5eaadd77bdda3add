"""The GPU-share model, once, for every layer above the snapshot: Alibaba gpushare's annotations
and node capacity (``model``), which GPUs a pod gets (``selection``), per-GPU used milli kept in
step with a node table (``ledger``), pod shapes, a workload's typical ones and FGD's fragmentation
measure (``shapes``, ``typical_pods``, ``fragmentation``). The GpuShare and GPU-policy plugins and
the simulator's replay metrics all read these (reference: hkust-adsl/kubernetes-scheduler-simulator).
"""
