"""GangScheduling: kube-scheduler v1.37's gang scheduling of the Workload API's PodGroups."""

from kubesched.plugins.gangscheduling.plugin import NAME, PERMIT_TIMEOUT_SECONDS, GangScheduling
from kubesched.plugins.gangscheduling.podgroup import POD_GROUP, WORKLOAD, PodGroup, parse_pod_group

__all__ = ["NAME", "PERMIT_TIMEOUT_SECONDS", "POD_GROUP", "WORKLOAD", "GangScheduling", "PodGroup", "parse_pod_group"]
