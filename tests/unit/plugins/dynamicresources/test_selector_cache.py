"""Selector results are kept across pods and cycles (selector_cache.py): a second pod's Filter
over the same nodes runs no CEL, a slice's new version is judged again, and a runtime error is
the same reason on every node and attempt."""

from __future__ import annotations

import copy

from kubesched.framework.status import Code
from kubesched.plugins.dynamicresources.cel import compile_selector
from unit.plugins.dynamicresources.test_plugin import (
    CEL_BROKEN,
    CLAIM,
    DRIVER,
    NODE,
    NODE2,
    Cycle,
    World,
    claim,
    claim_pod,
    device_class,
    resource_slice,
)

HEALTHY = f'device.attributes["{DRIVER}"].healthy'


def healthy_slice(node_name: str, healthy: bool, version: str = "1") -> dict[str, object]:
    s = resource_slice(node_name)
    s["metadata"]["resourceVersion"] = version
    s["spec"]["devices"][0]["attributes"] = {"healthy": {"bool": healthy}}
    return s


def world(*slices: dict[str, object]) -> World:
    claims = [claim(), claim("other-claim", owner="other-uid")]
    return World(claims, [device_class(selector=f'device.driver == "{DRIVER}"')], list(slices), nodes=(NODE, NODE2))


def filter_both(w: World, pod_name: str, uid: str, claim_name: str) -> list[Code]:
    c = Cycle(w, claim_pod(pod_name, uid, claim_name=claim_name))
    assert c.pre_filter().is_success
    return [c.filter(n).code for n in (NODE, NODE2)]


def test_second_pod_reuses_the_first_pods_selector_results() -> None:
    w = world(healthy_slice(NODE, True), healthy_slice(NODE2, True))
    cache = w.plugin.manager.selector_cache
    assert filter_both(w, "my-pod", "1234", CLAIM) == [Code.SUCCESS, Code.SUCCESS]
    evaluated = cache.evaluations
    assert evaluated == 2  # the class's selector on each node's one device
    assert filter_both(w, "other-pod", "other-uid", "other-claim") == [Code.SUCCESS, Code.SUCCESS]
    assert cache.evaluations == evaluated
    assert cache.hits >= 2


def test_new_slice_version_is_judged_again() -> None:
    w = World([claim(selector=HEALTHY)], [device_class()], [healthy_slice(NODE, True)])
    assert Cycle(w, claim_pod()).pre_filter().is_success
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter().is_success
    # The driver publishes the device unhealthy: a new resourceVersion of the slice.
    w.objects["ResourceSlice"] = {f"{NODE}-{DRIVER}": healthy_slice(NODE, False, version="2")}
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter().reasons == ("cannot allocate all claims",)


def test_runtime_error_is_the_same_reason_on_every_attempt() -> None:
    w = World([claim(selector=CEL_BROKEN)], [device_class()], [resource_slice(NODE)])
    first = Cycle(w, claim_pod())
    assert first.pre_filter().is_success
    st1 = first.filter()
    again = Cycle(w, claim_pod())
    assert again.pre_filter().is_success
    st2 = again.filter()
    assert st1.code == st2.code == Code.ERROR
    assert st1.reasons == st2.reasons
    assert "CEL runtime error: no such key: healthy" in st1.reasons[0]
    assert w.plugin.manager.selector_cache.evaluations == 1


def test_compiled_program_is_cached_per_expression() -> None:
    assert compile_selector(copy.copy(HEALTHY)) is compile_selector(HEALTHY)


def test_the_driver_comparison_answers_as_cel_does() -> None:
    """``device.driver == "NAME"`` is answered without the interpreter, and says what it says."""
    from kubesched.plugins.dynamicresources.cel import device_variable

    device = {"name": "gpu-0", "attributes": {"model": {"string": "A100"}}}
    for expression in (f'device.driver == "{DRIVER}"', f' "{DRIVER}"==device.driver ',
                       'device.driver == "other.example.com"'):
        compiled = compile_selector(expression)
        assert compiled.driver_equals is not None
        for driver in (DRIVER, "other.example.com", ""):
            variable = device_variable(driver, device)
            assert compiled.matches_device(driver, lambda v=variable: v) == compiled.matches(variable)
    # anything more goes to the interpreter
    assert compile_selector(f'device.driver == "{DRIVER}" && true').driver_equals is None
    assert compile_selector('device.driver == "a\\"b"').driver_equals is None
