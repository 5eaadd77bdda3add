"""The bind verb: POST pods/binding through the attached cluster, with the pod held on its node
for the bind (extender/holds.py). A pod not already held there (prioritize's best was another
node, or the pod is unknown) is held now, which re-checks that it fits, so two binds never take
the last of a node's resource; a failed bind releases the hold.

Then the served profile's binding cycle, as the scheduler runs it (scheduler.py
``_binding_cycle``; upstream pkg/scheduler/schedule_one.go ``bindingCycle``): PreBind of the held
pod with the state its Reserve ran with, and the annotations PreBind plugins asked for
(framework/handle.py ``add_binding_annotations``, e.g. UnderlayIP's address) sent on the Binding,
so they land on the pod with the bind. A PreBind rejection or a failed bind rolls back (Unreserve
and forget, as upstream's ``handleBindingCycleError``). A pod the extender has not seen in a
filter or prioritize call is bound without PreBind: no spec, no Reserve, nothing to write."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.extender.holds import InFlightHolds
from kubesched.extender.requests import ClusterView, Reply
from kubesched.extender.wire import BindingArgs, encode_binding_result
from kubesched.framework.handle import BINDING_ANNOTATIONS
from kubesched.framework.runtime import Framework
from kubesched.snapshot.pod import PodInfo


async def bind_reply(
    args: BindingArgs,
    cluster: ClusterView,
    holds: InFlightHolds,
    live_framework: Callable[[], Framework],
    recent_pods: Mapping[str, dict[str, Any]],
) -> Reply:
    """Bind ``args``' pod; ``recent_pods`` are the pods filter/prioritize saw, by UID (the
    binding request carries no pod spec to re-check the fit with)."""
    holds.expire()
    if holds.node_of(args.pod_uid) != args.node:
        holds.release(args.pod_uid, "elsewhere")
        raw = recent_pods.get(args.pod_uid)
        if raw is not None:
            st = holds.hold(live_framework(), PodInfo.from_raw(raw), args.node)
            if not st.is_success:
                msg = f"binding {args.pod_namespace}/{args.pod_name} to {args.node}: {st.message}"
                return Reply(200, encode_binding_result(msg), "bind")
    # Bound or not, the hold no longer expires while this bind is in flight (upstream does not
    # expire an assumed pod before FinishBinding): the watch or the failure settles it.
    holds.pin(args.pod_uid)
    annotations: dict[str, str] = {}
    held = holds.get(args.pod_uid)
    if held is not None:
        st = await held.framework.run_pre_bind(held.state, held.pod, args.node)
        if not st.is_success:
            holds.release(args.pod_uid, "bind_failed")
            msg = f"binding {args.pod_namespace}/{args.pod_name} to {args.node}: {st.message}"
            return Reply(200, encode_binding_result(msg), "bind")
        annotations = dict(held.state.get(BINDING_ANNOTATIONS) or {})
    try:
        await cluster.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node, annotations)
    except Exception as e:
        holds.release(args.pod_uid, "bind_failed")
        msg = f"binding {args.pod_namespace}/{args.pod_name} to {args.node}: {e}"
        return Reply(200, encode_binding_result(msg), "bind")
    return Reply(200, encode_binding_result())
