"""kubesched.testing.dra's ClaimLedger: the check the DRA differential tests rely on to say "no device
given twice" must see a device given twice, at the moment it happens, and only where sharing is not
allowed."""

from __future__ import annotations

from typing import Any

from kubesched.testing.dra import ClaimLedger, device_capacities

DRIVER = "gpu.example.com"


def claim(name: str, *results: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    status = {"allocation": {"devices": {"results": list(results)}}} if results else {}
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}, "status": status}


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": device, **extra}


def test_one_device_in_two_claims_is_seen_at_that_moment_even_if_undone_later() -> None:
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", result("gpu-0"), rv="5"))
    ledger.apply("ADDED", claim("b", result("gpu-1"), rv="6"))
    assert ledger.overlaps == []
    ledger.apply("MODIFIED", claim("b", result("gpu-0"), rv="7"))
    ledger.apply("MODIFIED", claim("b", rv="8"))  # deallocated again: the end state is clean
    assert [str(o) for o in ledger.overlaps] == [f"rv 7: {DRIVER}/node-1/gpu-0 held by 2 results: ns/a, ns/b"]
    assert ledger.most_allocated == 2


def test_a_deallocated_or_deleted_claim_frees_its_device() -> None:
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", result("gpu-0")))
    ledger.apply("DELETED", claim("a", result("gpu-0")))
    ledger.apply("ADDED", claim("b", result("gpu-0")))
    ledger.apply("MODIFIED", claim("b"))
    ledger.apply("MODIFIED", claim("c", result("gpu-0")))
    assert ledger.overlaps == []


def test_one_claim_holding_a_device_twice_is_an_overlap() -> None:
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", result("gpu-0"), result("gpu-0")))
    assert len(ledger.overlaps) == 1


def test_admin_access_does_not_count() -> None:
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", result("gpu-0")))
    ledger.apply("ADDED", claim("admin", result("gpu-0", adminAccess=True)))
    assert ledger.overlaps == []


def test_shares_within_capacity_pass_and_beyond_it_do_not() -> None:
    slices = [{"spec": {"driver": DRIVER, "pool": {"name": "node-1"},
                        "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "8Gi"}}}]}}]
    ledger = ClaimLedger(capacities=device_capacities(slices))
    ledger.apply("ADDED", claim("a", result("gpu-0", shareID="s1", consumedCapacity={"memory": "4Gi"})))
    ledger.apply("ADDED", claim("b", result("gpu-0", shareID="s2", consumedCapacity={"memory": "4096Mi"})))
    assert ledger.overlaps == []
    ledger.apply("ADDED", claim("c", result("gpu-0", shareID="s3", consumedCapacity={"memory": "1Gi"}), rv="9"))
    assert [o.why for o in ledger.overlaps] == ["shares consume memory 9663676416 > capacity 8589934592"]
    # A share beside an exclusive holder is an overlap whatever the capacity.
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", result("gpu-0", shareID="s1")))
    ledger.apply("ADDED", claim("b", result("gpu-0")))
    assert [o.why for o in ledger.overlaps] == ["held by 2 results"]


def test_held_at_is_what_the_claim_held_just_before_a_moment() -> None:
    """A pod bound at resourceVersion 12 had its claim allocated at 10; the allocation written at 12
    or later (after the bind) does not count, nor one already undone."""
    ledger = ClaimLedger()
    ledger.apply("ADDED", claim("a", rv="3"))
    ledger.apply("MODIFIED", claim("a", result("gpu-0"), rv="10"))
    ledger.apply("MODIFIED", claim("a", rv="15"))
    ledger.apply("DELETED", claim("a", rv="17"))
    gpu0 = ((DRIVER, "node-1", "gpu-0"),)
    assert [ledger.held_at("ns/a", rv) for rv in ("3", "10", "11", "12", "15", "16", "18")] == [
        (), (), gpu0, gpu0, gpu0, (), ()]
    assert ledger.held_at("ns/other", "12") == ()
