"""Toleration matching and vectorised taint checks over the node table.

Ports of k8s.io/api/core/v1/toleration.go (Toleration.ToleratesTaint, newest: with the Lt/Gt
comparison operators behind the TaintTolerationComparisonOperators gate),
k8s.io/component-helpers/scheduling/corev1/helpers.go (TolerationsTolerateTaint,
FindMatchingUntoleratedTaint) and pkg/scheduler/framework/plugins/helper/taint.go
(DoNotScheduleTaintsFilterFunc).

Taints live in the table as interned taint sets (``taint_set_id`` per row, ``taint_sets[id]``);
the vectorised helpers evaluate each distinct set among the given rows once and gather.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows, Taint

TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE = "NoExecute"

TOLERATION_OP_EXISTS = "Exists"
TOLERATION_OP_EQUAL = "Equal"
TOLERATION_OP_LT = "Lt"
TOLERATION_OP_GT = "Gt"

#: v1.TaintNodeUnschedulable
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# k8s.io/apimachinery/pkg/api/validate/content.IsDecimalInteger: "0" or -?[1-9][0-9]* (no "+",
# no leading zeros, no "-0").
_CANONICAL_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    @staticmethod
    def from_raw(raw: Any) -> Toleration:
        if not isinstance(raw, dict):
            return Toleration(operator="<invalid>")  # matches nothing
        return Toleration(
            key=str(raw.get("key") or ""),
            operator=str(raw.get("operator") or ""),
            value=str(raw.get("value") or ""),
            effect=str(raw.get("effect") or ""),
        )


def parse_tolerations(raw: Iterable[Any]) -> tuple[Toleration, ...]:
    if not raw:
        return ()
    return tuple(Toleration.from_raw(t) for t in raw)


#: Parsed toleration lists by their JSON: the pods of one workload share one list (and one
#: parse). Bounded; cleared when full.
_PARSED: dict[bytes, tuple[Toleration, ...]] = {}
_MAX_PARSED = 4096


def pod_tolerations(pod: PodInfo) -> tuple[Toleration, ...]:
    """The pod's tolerations parsed once and cached on the pod (shared by all taint plugins)."""
    cached = pod.memo.get("_tolerations")
    if cached is None:
        key = tolerations_key(pod)
        cached = _PARSED.get(key)
        if cached is None:
            if len(_PARSED) >= _MAX_PARSED:
                _PARSED.clear()
            cached = _PARSED[key] = parse_tolerations(pod.tolerations)
        pod.memo["_tolerations"] = cached
    result: tuple[Toleration, ...] = cached
    return result


def tolerations_key(pod: PodInfo) -> bytes:
    """spec.tolerations as JSON: equal keys, equal tolerations (bytes hash once, so it is a cheap
    dictionary key)."""
    key = pod.memo.get("_tolerations_key")
    if key is None:
        try:
            key = orjson.dumps(pod.tolerations)
        except (TypeError, orjson.JSONEncodeError):  # not JSON-shaped (parsed later as invalid)
            key = repr(pod.tolerations).encode()
        pod.memo["_tolerations_key"] = key
    result: bytes = key
    return result


def _canonical_int(value: str) -> int | None:
    if not _CANONICAL_DECIMAL.fullmatch(value):
        return None
    n = int(value)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def tolerates_taint(toleration: Toleration, taint: Taint, enable_comparison_operators: bool = False) -> bool:
    """Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go).

    1. empty effect matches every effect, otherwise effects must be equal;
    2. empty key matches every key (with Exists), otherwise keys must be equal;
    3. operator "" or Equal compares values, Exists matches any value;
    4. Lt/Gt compare canonical int64 values (taint < / > toleration) when the comparison
       operators are enabled; unparsable values, or the gate off, do not tolerate;
    5. any other operator tolerates nothing.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op in ("", TOLERATION_OP_EQUAL):
        return toleration.value == taint.value
    if op == TOLERATION_OP_EXISTS:
        return True
    if op in (TOLERATION_OP_LT, TOLERATION_OP_GT):
        if not enable_comparison_operators:
            return False
        tol_val = _canonical_int(toleration.value)
        taint_val = _canonical_int(taint.value)
        if tol_val is None or taint_val is None:
            return False
        return taint_val < tol_val if op == TOLERATION_OP_LT else taint_val > tol_val
    return False


def tolerations_tolerate_taint(
    tolerations: Sequence[Toleration], taint: Taint, enable_comparison_operators: bool = False
) -> bool:
    """TolerationsTolerateTaint: some toleration tolerates the taint."""
    return any(tolerates_taint(t, taint, enable_comparison_operators) for t in tolerations)


def do_not_schedule_taints_filter(taint: Taint) -> bool:
    """helper.DoNotScheduleTaintsFilterFunc: only NoSchedule and NoExecute taints block scheduling."""
    return taint.effect in (TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE)


def find_matching_untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    inclusion_filter: Callable[[Taint], bool] | None = None,
    enable_comparison_operators: bool = False,
) -> Taint | None:
    """FindMatchingUntoleratedTaint: the first taint passing the filter that no toleration tolerates."""
    for taint in taints:
        if inclusion_filter is not None and not inclusion_filter(taint):
            continue
        if not tolerations_tolerate_taint(tolerations, taint, enable_comparison_operators):
            return taint
    return None


def per_taint_set(
    table: NodeTable,
    rows: Rows,
    fn: Callable[[tuple[Taint, ...]], Any],
    dtype: npt.DTypeLike,
    cache_key: Hashable | None = None,
) -> npt.NDArray[Any]:
    """``fn(taints of row)`` for each row, evaluating ``fn`` once per distinct taint set.

    Taint sets are interned by the table and few (most nodes share the empty set), so ``fn`` is
    evaluated over all of them into a lookup table and the rows gather from it. With a
    ``cache_key`` naming everything ``fn`` depends on (e.g. the pod's tolerations), the lookup
    table is reused by later pods until a new taint set appears.
    """
    sets = table.taint_sets
    lut: npt.NDArray[Any] | None = None
    if cache_key is not None:
        cached = table.memo.get(cache_key)
        if cached is not None and len(cached[0]) == len(sets):
            lut, nonzero = cached
    if lut is None:
        lut = np.array([fn(ts) for ts in sets], dtype=dtype)
        nonzero = bool(lut.any())
        if cache_key is not None:
            table.memo[cache_key] = (lut, nonzero)
    if not nonzero:  # the same (zero/False) value on every node: no gather needed
        return np.zeros(len(rows), dtype=dtype)
    result: npt.NDArray[Any] = lut[table.taint_set_id[rows]]
    return result


def untolerated_mask(
    table: NodeTable,
    rows: Rows,
    tolerations: Sequence[Toleration],
    inclusion_filter: Callable[[Taint], bool] | None = do_not_schedule_taints_filter,
    enable_comparison_operators: bool = False,
) -> npt.NDArray[np.bool_]:
    """True where the row has a taint (passing the filter) that the tolerations do not tolerate."""

    def untolerated(taints: tuple[Taint, ...]) -> bool:
        if not taints:
            return False
        return (
            find_matching_untolerated_taint(taints, tolerations, inclusion_filter, enable_comparison_operators)
            is not None
        )

    key = ("untolerated", tolerations if isinstance(tolerations, tuple) else tuple(tolerations), inclusion_filter,
           enable_comparison_operators)
    result: npt.NDArray[np.bool_] = per_taint_set(table, rows, untolerated, np.bool_, key)
    return result


def count_intolerable_taints(
    table: NodeTable,
    rows: Rows,
    tolerations: Sequence[Toleration],
    effect: str = TAINT_EFFECT_PREFER_NO_SCHEDULE,
    enable_comparison_operators: bool = False,
    cache_key: Hashable | None = None,
) -> npt.NDArray[np.int64]:
    """Per row, how many taints with ``effect`` the tolerations do not tolerate
    (tainttoleration.countIntolerableTaintsPreferNoSchedule). ``cache_key``: a cheaper name than
    the default for exactly these tolerations, effect and flag (see :func:`per_taint_set`)."""

    def count(taints: tuple[Taint, ...]) -> int:
        return sum(
            1
            for t in taints
            if t.effect == effect and not tolerations_tolerate_taint(tolerations, t, enable_comparison_operators)
        )

    key = cache_key if cache_key is not None else (
        "intolerable", tolerations if isinstance(tolerations, tuple) else tuple(tolerations), effect,
        enable_comparison_operators,
    )
    result: npt.NDArray[np.int64] = per_taint_set(table, rows, count, np.int64, key)
    return result
