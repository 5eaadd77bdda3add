"""DefaultBinder: bind the pod through the cluster client (pods/binding).

Port of pkg/scheduler/framework/plugins/defaultbinder/default_binder.go.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import BINDING_ANNOTATIONS, BindConflictError, PodGoneError
from kubesched.framework.interfaces import BindPlugin
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo

log = logging.getLogger(__name__)

#: Success already naming this plugin: the framework's ``with_plugin`` then returns it as it is
#: instead of building a Status per bound pod (Statuses are immutable, so one is shared).
_BOUND = Status(plugin="DefaultBinder")


class DefaultBinder(BindPlugin):
    name: ClassVar[str] = "DefaultBinder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name``.

        BindConflictError (already bound, HTTP 409) and PodGoneError (HTTP 404) propagate: the
        scheduler forgets the pod for those. Any other failure becomes an Error status (upstream
        framework.AsStatus(err)), so the pod is unreserved and retried with backoff.
        """
        client = self.handle.client
        if client is None:
            return Status.error(f"binding pod {pod.key} to node {node_name}: no cluster client configured")
        if log.isEnabledFor(logging.DEBUG):  # pod.key builds a string: only when it is logged
            log.debug("binding pod %s to node %s", pod.key, node_name)
        annotations = state.get(BINDING_ANNOTATIONS)
        try:
            if annotations:  # what PreBind plugins asked to land with the bind (add_binding_annotations)
                await client.bind(pod, node_name, annotations)
            else:
                await client.bind(pod, node_name)
        except (BindConflictError, PodGoneError):
            raise
        except Exception as e:
            return Status.error(f"binding pod {pod.key} to node {node_name}: {type(e).__name__}: {e}")
        return _BOUND
