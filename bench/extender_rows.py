"""How many rows of each prioritize list changed since those rows were last scored, on a recorded stream.

The question behind it: could prioritize keep one pod's scores per node and, for the next pod with
the same spec, score again only the nodes that changed since (the node an earlier pod was held on,
nodes the watch touched)? That pays only if few lists hold a changed node, since a Score plugin's
cost is mostly per call, not per node. This plays a stream recorded by bench/noop_extender.py
(bench/extender_replay.py's docstring says how) through the replay's service in this process, no
HTTP, the watch played as the replay plays it (``WatchStandIn``), and at every scoring (prioritize's,
or the one computed ahead) counts the list's rows whose entry in the table's change log
(``NodeTable.row_versions``) moved since the last scoring that included them; and, for each such
row, how many prioritize requests back the pod held on it was.

``python -m bench.extender_rows --stream /tmp/stream.txt --pods 2000``
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.extender_replay import WatchStandIn, read_stream, replay_service

#: Scorings left out at the start (the rows were never scored before).
WARM_UP = 10


def count(stream: Path, pods: int | None, init_pods: int = 500, watch_lag: int = 1,
          pending_order: str = "list") -> dict[str, Any]:
    from kubesched.extender.requests import Deadline

    recorded = read_stream(stream, pods)
    svc = replay_service(recorded, init_pods, pending_order)
    watch = WatchStandIn(svc, watch_lag)
    table = svc.cluster.cache.table
    scored_at = np.full(len(table.row_versions), -1, dtype=np.int64)
    changed: list[int] = []
    held_rows: list[int | None] = []
    back: Counter[str] = Counter()
    scores = svc.extender_scores

    def counted(fwk: Any, pod: Any, rows: Any, *args: Any, **kwargs: Any) -> Any:
        versions = table.row_versions[rows]
        moved = rows[versions != scored_at[rows]]
        scored_at[rows] = versions
        changed.append(len(moved))
        if len(changed) > WARM_UP:
            for row in moved.tolist():
                ago = next((i for i in range(1, min(len(held_rows), 8) + 1) if held_rows[-i] == row), None)
                back["other" if ago is None else str(ago)] += 1
        return scores(fwk, pod, rows, *args, **kwargs)

    svc.extender_scores = counted
    for reqs in recorded:
        last: tuple[bytes, Any] | None = None
        for verb, body in reqs:
            # The server hands prioritize the value filter decoded when the bytes are the same.
            data = last[1] if last is not None and last[0] == body else orjson.loads(body)
            last = (body, data)
            getattr(svc, verb)(data, Deadline(verb, 60.0))
            if verb == "prioritize":
                node = svc.holds.node_of(data["Pod"]["metadata"]["uid"])
                held_rows.append(table.row_of(node) if node is not None else None)
            watch.answered(data)
            if svc.ahead_due:
                svc.work_ahead()
    counts = np.bincount(np.array(changed[WARM_UP:], dtype=np.int64)) if len(changed) > WARM_UP else np.zeros(1)
    total = int(counts.sum())
    return {
        "stream": str(stream), "pods": len(recorded), "scorings": total,
        "lists_by_rows_changed": {str(k): int(v) for k, v in enumerate(counts) if v},
        "share_by_rows_changed": {str(k): round(int(v) / max(total, 1), 4) for k, v in enumerate(counts) if v},
        "changed_row_held_by_the_pod_n_prioritize_requests_back": dict(sorted(back.items())),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.extender_rows", description=__doc__.splitlines()[0])
    ap.add_argument("--stream", type=Path, required=True, help="requests recorded by bench/noop_extender.py")
    ap.add_argument("--pods", type=int, default=None, help="the first N pods of the stream")
    ap.add_argument("--init-pods", type=int, default=500)
    ap.add_argument("--watch-lag", type=int, default=1)
    ap.add_argument("--pending-order", choices=("list", "scheduler"), default="list")
    args = ap.parse_args(argv)
    print(json.dumps(count(args.stream, args.pods, args.init_pods, args.watch_lag, args.pending_order), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
