from kubesched.plugins.coscheduling.args import CoschedulingArgs
from kubesched.plugins.coscheduling.plugin import Coscheduling
from kubesched.plugins.coscheduling.podgroup import POD_GROUP_LABEL, PodGroup, parse_pod_group

__all__ = ["POD_GROUP_LABEL", "Coscheduling", "CoschedulingArgs", "PodGroup", "parse_pod_group"]
