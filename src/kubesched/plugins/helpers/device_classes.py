"""Which DeviceClass backs an extended resource (DRAExtendedResource, GA and on in v1.37).

Shared by DynamicResources (which allocates such resources as a special ResourceClaim) and
NodeResourcesFit (which leaves them to DynamicResources on nodes that do not offer them), as
upstream shares the DRA manager's ``DeviceClassResolver``. Port of
k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache/extendedresourcecache.go
(v0.37.1) and pkg/scheduler/util/utils.go ``IsDRAExtendedResourceName`` (v1.37.1).

A class maps its ``spec.extendedResourceName`` and its implicit name
``deviceclass.resource.kubernetes.io/<class name>``. Two classes naming the same extended
resource: the one created last wins, on equal creation times the smaller name (upstream's cache
keeps that one whatever order the events come in). Difference: upstream's cache also drops the
implicit name of a class that lost such a contest when it arrived second; kubesched maps every
class's implicit name (the outcome does not depend on the order classes were seen).

Kept in a helper module (not the plugin's package) so that NodeResourcesFit does not import the
allocator and its CEL library.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from kubesched.api.validation import is_extended_resource_name

#: resourceapi.ResourceDeviceClassPrefix
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
#: The kind name DynamicResources declares (``handle.objects``).
DEVICE_CLASS_KIND = "DeviceClass"


@functools.lru_cache(maxsize=4096)
def is_dra_extended_resource_name(name: str) -> bool:
    """IsDRAExtendedResourceName: an extended resource name, or a DeviceClass's implicit one
    (cached: asked per pod and node of the few resource names a cluster has)."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


def extended_resource_classes(classes: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ExtendedResourceCache's ``resourceName2class``: extended resource name -> its DeviceClass."""
    out: dict[str, dict[str, Any]] = {}
    explicit: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class name) of the winner
    for cls in classes.values():
        meta = cls.get("metadata") or {}
        name = str(meta.get("name", ""))
        out[DEVICE_CLASS_PREFIX + name] = cls
    for cls in classes.values():
        meta = cls.get("metadata") or {}
        resource = (cls.get("spec") or {}).get("extendedResourceName")
        if not resource:
            continue
        # RFC 3339 timestamps in UTC ("Z") compare as strings in time order.
        mine = (str(meta.get("creationTimestamp") or ""), str(meta.get("name", "")))
        have = explicit.get(str(resource))
        if have is None or mine[0] > have[0] or (mine[0] == have[0] and mine[1] < have[1]):
            explicit[str(resource)] = mine
            out[str(resource)] = cls
    return out
