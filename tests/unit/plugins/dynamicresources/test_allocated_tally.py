"""What the claims' allocations hold (allocated_tally.py), kept claim by claim: a claim allocated,
deallocated, deleted, or two claims on one device, give what recounting every claim gives."""

from __future__ import annotations

from typing import Any

from kubesched.plugins.dynamicresources.allocated_tally import AllocatedTally
from kubesched.plugins.dynamicresources.claims import allocated_devices

DRIVER = "gpu.example.com"


def claim(name: str, version: str, *results: dict[str, Any]) -> dict[str, Any]:
    status = {"allocation": {"devices": {"results": list(results)}}} if results else {}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}, "status": status}


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": DRIVER, "pool": "pool-1", "device": device, **extra}


def check(tally: AllocatedTally, claims: dict[str, dict[str, Any]]) -> set[str]:
    tally.sync(claims)
    state, expected = tally.state(), allocated_devices(claims)
    assert (state.devices, state.shared) == (expected.devices, expected.shared)
    assert {d: c for d, c in state.consumed.items() if any(c.values())} == expected.consumed
    return {d[2] for d in state.devices | state.shared}


def test_the_tally_follows_allocations_deallocations_and_deletions() -> None:
    tally = AllocatedTally()
    claims = {"ns/a": claim("a", "1", result("gpu-0")), "ns/b": claim("b", "1")}
    assert check(tally, claims) == {"gpu-0"}
    claims["ns/b"] = claim("b", "2", result("gpu-1"), result("gpu-2", adminAccess=True))
    assert check(tally, claims) == {"gpu-0", "gpu-1"}  # admin access holds nothing
    claims["ns/a"] = claim("a", "2")  # deallocated
    assert check(tally, claims) == {"gpu-1"}
    del claims["ns/b"]
    assert check(tally, claims) == set()


def test_a_device_two_claims_hold_stays_held_until_both_let_go() -> None:
    tally = AllocatedTally()
    shared = {"shareID": "s", "consumedCapacity": {"memory": "10Gi"}}
    claims = {"ns/a": claim("a", "1", result("gpu-0", **shared)),
              "ns/b": claim("b", "1", result("gpu-0", **{**shared, "shareID": "t"})),
              "ns/c": claim("c", "1", result("gpu-1")), "ns/d": claim("d", "1", result("gpu-1"))}
    assert check(tally, claims) == {"gpu-0", "gpu-1"}
    assert tally.state().consumed[(DRIVER, "pool-1", "gpu-0")]["memory"] == 20 * 2**30
    del claims["ns/a"], claims["ns/c"]
    assert check(tally, claims) == {"gpu-0", "gpu-1"}
    assert tally.state().consumed[(DRIVER, "pool-1", "gpu-0")]["memory"] == 10 * 2**30
    del claims["ns/b"], claims["ns/d"]
    assert check(tally, claims) == set() and tally.state().consumed == {}
