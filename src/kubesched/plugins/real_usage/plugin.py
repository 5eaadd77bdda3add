"""RealUsage / MemRealUsage: score nodes by their real usage read from Prometheus (reference 004).

Requests say what pods asked for, not what nodes use: a node whose requests look free may be
nearly out of memory. These plugins poll Prometheus in the background and prefer nodes with low
real usage — a node at 100 % real memory scores 0 whatever its requests say — and can refuse
nodes above a threshold (``maxUtilization``).

The scheduling path never waits for Prometheus: a background task (``start()``) polls every
``queryMetricIntervalSeconds`` into a cache (node → value, poll time); Score reads a per-row array
rebuilt only when a poll lands, the node set changes or a value goes stale. A node without a fresh
value (missing, stale, Prometheus down) gets ``neutralScore`` and passes the Filter; this is
counted in the ``kubesched_real_usage_*`` metrics and logged when it starts and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import Counter, Gauge

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import FilterPlugin, Plugin, PreFilterPlugin, ScorePlugin, Scores
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.real_usage.args import MemRealUsageArgs, RealUsageArgs
from kubesched.plugins.real_usage.prometheus import Fetcher, PrometheusFetcher, UsageCache, node_key
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

log = logging.getLogger(__name__)

QUERY_FAILURES = Counter(
    "kubesched_real_usage_query_failures",
    "Prometheus queries of the real-usage plugins that failed, by plugin and resource.",
    ["plugin", "resource"],
)
NODES_WITHOUT_METRICS = Gauge(
    "kubesched_real_usage_nodes_without_metrics",
    "Nodes scored neutrally for lack of a fresh real-usage value, by plugin and profile.",
    ["plugin", "profile"],
)
LAST_SUCCESS = Gauge(
    "kubesched_real_usage_last_success_timestamp_seconds",
    "When the real-usage plugin last polled Prometheus successfully, by plugin and profile.",
    ["plugin", "profile"],
)

FloatArray = npt.NDArray[np.float64]


class RealUsage(PreFilterPlugin, FilterPlugin, ScorePlugin):
    name = "RealUsage"
    args_model = RealUsageArgs

    def __init__(self, args: RealUsageArgs | None, handle: Handle) -> None:
        if args is None:
            raise ValueError(f"{self.name} needs args (prometheusApiAddr)")
        super().__init__(args, handle)
        self.args: RealUsageArgs = self.args
        self.resources = [r.name for r in args.resources]
        w = np.array([r.weight for r in args.resources], dtype=np.float64)
        self.weights: FloatArray = w / w.sum()
        limits = args.max_utilization
        self.thresholds = [(i, limits[r]) for i, r in enumerate(self.resources) if r in limits]
        self.cache = UsageCache()
        #: Replace before ``start()`` to read from elsewhere (tests use a fake).
        self.fetcher: Fetcher = PrometheusFetcher(args.prometheus_api_addr, args.query_metric_time_seconds)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._healthy: bool | None = None
        self._matrix: FloatArray | None = None
        self._matrix_key: tuple[int, Any] | None = None
        self._stale_at = math.inf
        self._missing_logged = False
        self._labels = (self.name, handle.profile_name)

    def share_background_state(self, started: Plugin) -> None:
        if isinstance(started, RealUsage):
            self.cache = started.cache

    # -- polling --------------------------------------------------------------------------------
    async def start(self) -> None:
        """One poll right away (bounded by the query timeout), then one every interval."""
        if self._task is not None:
            return
        self._stopping = False
        await self.poll_once()
        self._task = asyncio.get_running_loop().create_task(self._poll_forever())

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # Bounded: shutdown must not hang on a poll that ignores cancellation.
            await asyncio.wait({task}, timeout=5)
            if task.done() and not task.cancelled():
                with contextlib.suppress(Exception):
                    task.result()
        await self.fetcher.close()

    async def _poll_forever(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.args.query_metric_interval_seconds)
            if not self._stopping:
                await self.poll_once()

    async def poll_once(self) -> bool:
        """Query every resource; a failure keeps the previous values (they go stale in time)."""
        ok = True
        for res in self.resources:
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
                # races with the query finishing, and stop() would then wait for ever.
                async with asyncio.timeout(self.args.query_metric_time_seconds):
                    samples = await self.fetcher.query(self.args.query(res))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # Prometheus down or answering nonsense: survivable by design
                ok = False
                QUERY_FAILURES.labels(self.name, res).inc()
                if self._healthy is not False:
                    log.warning(
                        "%s: querying Prometheus at %s for %s failed (%s: %s); nodes without a fresh "
                        "value get the neutral score %d",
                        self.name, self.args.prometheus_api_addr, res, type(e).__name__, e, self.args.neutral_score,
                    )
                continue
            values: dict[str, float] = {}
            for labels, v in samples:
                key = labels.get(self.args.node_label)
                if key and math.isfinite(v):
                    values[node_key(key)] = v
            self.cache.update(res, values)
        if ok:
            LAST_SUCCESS.labels(*self._labels).set_to_current_time()
            if self._healthy is False:
                log.warning("%s: Prometheus at %s answers again", self.name, self.args.prometheus_api_addr)
        self._healthy = ok
        return ok

    # -- the per-row usage array ------------------------------------------------------------------
    def usage(self, table: NodeTable) -> FloatArray:
        """used fraction per (row, resource); NaN where no fresh value exists."""
        alive = table.alive_rows()
        key = (self.cache.version, alive)
        now = self.cache.now()
        if (
            self._matrix is not None
            and self._matrix_key is not None
            and self._matrix_key[0] == key[0]
            and self._matrix_key[1] is alive
            and now < self._stale_at
            and len(self._matrix) >= len(table.names)
        ):
            return self._matrix
        m = np.full((len(table.names), len(self.resources)), np.nan)
        stale_after = self.args.stale_seconds
        stale_at = math.inf
        for row in alive.tolist():
            keys = _node_keys(table, row)
            for j, res in enumerate(self.resources):
                bucket = self.cache.values.get(res)
                if not bucket:
                    continue
                for k in keys:
                    hit = bucket.get(k)
                    if hit is not None:
                        v, t = hit
                        if now - t < stale_after:
                            m[row, j] = min(max(v, 0.0), 1.0)
                            stale_at = min(stale_at, t + stale_after)
                        break
        self._matrix, self._matrix_key, self._stale_at = m, key, stale_at
        missing = int(np.isnan(m[alive]).any(axis=1).sum()) if len(alive) else 0
        NODES_WITHOUT_METRICS.labels(*self._labels).set(missing)
        if missing and not self._missing_logged:
            log.warning("%s: %d node(s) have no fresh real-usage value; scored neutrally", self.name, missing)
        self._missing_logged = bool(missing)
        return m

    # -- extension points -----------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE, "NodeAddOrUpdate"),)

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, (SUCCESS if self.thresholds else Status.skip())

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        if not self.thresholds:
            return Verdicts.all_pass(len(rows))
        u = self.usage(table)[rows]
        codes = np.zeros(len(rows), dtype=np.int32)
        statuses: list[Status] = []
        for j, limit in self.thresholds:
            over = u[:, j] > limit  # NaN compares False: no value, no refusal
            if over.any():
                statuses.append(
                    Status.unschedulable(f"node(s) had real {self.resources[j]} usage above {limit:.0%}")
                )
                codes[over & (codes == 0)] = len(statuses)
        return Verdicts(codes, statuses)

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        u = self.usage(table)[rows]
        per = np.where(np.isnan(u), float(self.args.neutral_score), (1.0 - u) * 100.0)
        scores: Scores = np.rint(per @ self.weights).astype(np.int64)
        np.clip(scores, 0, 100, out=scores)
        return scores


class MemRealUsage(RealUsage):
    """The reference's plugin: score by real memory usage only (same args as the reference)."""

    name = "MemRealUsage"
    args_model = MemRealUsageArgs


def _node_keys(table: NodeTable, row: int) -> list[str]:
    """How a node may be named in samples: its name, then its addresses."""
    keys = [table.names[row]]
    for a in (table.nodes[row].get("status") or {}).get("addresses") or []:
        addr = a.get("address") if isinstance(a, dict) else None
        if addr and addr not in keys:
            keys.append(str(addr))
    return keys
