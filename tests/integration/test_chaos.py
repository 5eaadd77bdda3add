"""The chaos suite (bench/chaos.py) at its small size, on a control plane of its own that audits
every pods/binding create. Each scenario asserts, from a watch, that no node is over-committed, no
pod is bound twice or to a deleted node and every pod that fits is bound in the end; and from the
audit log, that no two replicas bind within a second of each other. The figures are printed; the
full-size ones are in RELIABILITY.md (``python -m bench chaos --size full``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing import controlplane

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import chaos  # noqa: E402
from bench.chaos_cluster import chaos_control_plane  # noqa: E402
from bench.chaos_watch import assert_clean  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.chaos]
SMALL = chaos.SIZES["small"]


@pytest.fixture(scope="module")
def ctx(control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chaos.Ctx]:
    # control_plane (conftest) for the binaries' checks and skip/fail policy; the faults (apiserver
    # restarts, etcd compaction) and the audit log need a control plane of this module's own.
    workdir = tmp_path_factory.mktemp("chaos")
    with chaos_control_plane(workdir, control_plane.bin_dir) as (cp, audit):
        yield chaos.Ctx(cp, audit, workdir, log=lambda s: None)


def _clean(result: dict[str, Any]) -> dict[str, Any]:
    print(f"\n[chaos] {result['scenario']} in {result['elapsed_s']}s: {result['figures']}")
    assert_clean(result["invariants"])
    assert not result["invariants"].get("split_brain"), result["invariants"]["split_brain"]
    return dict(result["figures"])


def test_backlog_at_start_with_the_stock_configuration(ctx: chaos.Ctx) -> None:
    [result] = chaos.run_scenario(ctx, "backlog", SMALL)
    f = _clean(result)
    assert f["all_bound"]
    assert f["exits_while_leading"] == 0 and f["lease_transitions"] == 0  # the lease was held throughout


def test_kill_9_the_leader_during_a_burst(ctx: chaos.Ctx) -> None:
    [result] = chaos.run_scenario(ctx, "failover", SMALL)
    f = _clean(result)
    assert f["all_bound"] and f["kills"] == SMALL.kills
    measured = [k for k in f["per_kill"] if k["expiry_to_first_bind_s"] is not None]
    assert measured, f["per_kill"]
    # The new leader waited for the killed one's lease to expire before its first bind.
    assert all(k["expiry_to_first_bind_s"] > -0.5 for k in measured), f["per_kill"]


@pytest.mark.parametrize("scenario", ["failover-backlog", "failover-backlog-kube-scheduler"])
def test_kill_9_the_leader_with_a_backlog_pending(ctx: chaos.Ctx, scenario: str) -> None:
    [result] = chaos.run_scenario(ctx, scenario, SMALL)
    f = _clean(result)
    assert f["all_bound"] and f["pending_at_kill"] > 0
    # The standby bound the rest, and only once the killed leader's lease had expired.
    assert f["standby_binds"] > 0
    assert f["expiry_to_first_bind_s"] > -0.5, f


def test_apiserver_restarted_mid_burst(ctx: chaos.Ctx) -> None:
    [result] = chaos.run_scenario(ctx, "apiserver", SMALL)
    f = _clean(result)
    assert f["all_bound"] and f["restarts"] == SMALL.restarts


def test_etcd_compaction_forces_410_on_every_watch(ctx: chaos.Ctx) -> None:
    [result] = chaos.run_scenario(ctx, "compaction", SMALL)
    f = _clean(result)
    assert f["all_bound"]
    assert f["informer_relists_after_410"] >= 1  # kubesched's informers did resume into 410 and relist


def test_latency_resets_and_a_partition_between_kubesched_and_the_apiserver(ctx: chaos.Ctx) -> None:
    [result] = chaos.run_scenario(ctx, "proxy", SMALL)
    f = _clean(result)
    assert f["all_bound"]
    assert f["connections_reset"] > 0
    assert f["leader_exit_code"] == 1  # the partitioned leader stepped down (and was replaced)
    assert f["stepped_down_before_takeover"], f


def test_extender_killed_restarted_and_slow(ctx: chaos.Ctx) -> None:
    results = chaos.run_scenario(ctx, "extender", SMALL)
    for result in results:
        f = _clean(result)
        assert f["behaves_as_configured"], (result["scenario"], f)
    strict = next(r["figures"] for r in results if r["scenario"] == "extender-ignorable-false")
    assert strict["failed_scheduling_events"] > 0  # the pods that waited were told why


def test_node_and_pods_deleted_while_assumed(ctx: chaos.Ctx) -> None:
    node_deleted, pods_deleted = chaos.run_scenario(ctx, "assumed", SMALL)
    f = _clean(node_deleted)
    assert f["gang_bound"] and f["none_on_deleted_node"], f
    g = _clean(pods_deleted)
    assert g["gang_bound_after_waiting_members_were_deleted"], g
    assert g["node_refilled_after_deletes_in_bind"], g
