"""Test builders and an in-process harness for plugin authors (and kubesched's own tests).

* objects: :func:`node`, :func:`kwok_node`, :func:`pod`, :func:`pod_manifest` (raw v1 dicts),
  :func:`pod_info` (a parsed :class:`~kubesched.snapshot.pod.PodInfo`), :func:`table_of` (a
  :class:`~kubesched.snapshot.table.NodeTable` of nodes and bound pods);
* harness: :func:`handle`, :func:`new_plugin` (one plugin on a table), :func:`framework_for`
  (a real Framework for a profile of your plugins), :class:`StaticProfile` (a profile of exactly
  the plugins named, for ``Scheduler.build``).

A real local control plane (etcd, kube-apiserver, KWOK, kube-scheduler) is in
:mod:`kubesched.testing.controlplane`, imported on its own (it is not loaded by this package).
"""

from kubesched.testing.builders import KWOK_ANNOTATION, kwok_node, node, pod, pod_info, pod_manifest, table_of
from kubesched.testing.harness import StaticProfile, framework_for, handle, new_plugin

__all__ = [
    "KWOK_ANNOTATION",
    "StaticProfile",
    "framework_for",
    "handle",
    "kwok_node",
    "new_plugin",
    "node",
    "pod",
    "pod_info",
    "pod_manifest",
    "table_of",
]
