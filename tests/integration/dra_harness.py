"""What the DRA differential tests share: claims of a namespace, releasing them between runs, a
pod's PodScheduled message, the claim watch that says no device was given twice (kept per scheduler
run), and ``DraCase``: a small DRA cluster (slices, classes, claims or templates, pods in waves) run
by one scheduler, its outcome as a comparable dict (used by test_differential_dra_cases.py and
test_dump_dra.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.testing import pod_manifest
from kubesched.testing.controlplane import ApiError, ControlPlane
from kubesched.testing.dra import ClaimWatch, device_capacities

from .test_differential_spread import run_both
from .test_live_scheduler import pods_in

GROUP = "kubesched.test/group"
RESOURCE = "/apis/resource.k8s.io/v1"


def claims_in(cp: ControlPlane, ns: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in cp.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims")["items"]}


def release_claims(cp: ControlPlane, ns: str) -> None:
    """Deallocate and delete the namespace's claims once their pods are gone (kube-controller-manager's
    resourceclaim controller does the same, in its own time)."""
    for name, c in claims_in(cp, ns).items():
        path = f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}"
        for attempt in range(10):
            try:
                if c.get("status"):
                    c = cp.api("PUT", f"{path}/status", {**c, "status": {}})
                if c["metadata"].get("finalizers"):
                    cp.api("PUT", path, {**c, "metadata": {**c["metadata"], "finalizers": []}})
                cp.api("DELETE", path)
                break
            except ApiError as e:
                if e.status == 404:  # gone meanwhile (a template's claim, deleted by the controller)
                    break
                # 409: the resourceclaim controller (or a scheduler still stopping) wrote it between
                # our read and our write, as it may: read it again and redo what is left.
                if e.status != 409 or attempt == 9:
                    raise
                try:
                    c = cp.get(path)
                except ApiError as gone:
                    if gone.status == 404:
                        break
                    raise
    cp.wait_for(lambda: not claims_in(cp, ns), 60, 0.2, "claims deleted")


def reason(pod: dict[str, Any]) -> str:
    """The PodScheduled=False message ("" when the pod has none)."""
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "")
    return ""


def watched(cp: ControlPlane, ns: str, scenario: Callable[[str], dict[str, Any]],
            slices: Callable[[], list[dict[str, Any]]] = list) -> Callable[[str], dict[str, Any]]:
    """``scenario`` with every ResourceClaim event of ``ns`` recorded from before it starts to after it
    ends; its outcome gains ``claim_overlaps`` (each moment a device was held more than DRA allows,
    shares judged against the capacities of ``slices()``) and ``most_claims_allocated``."""

    def run(scheduler: str) -> dict[str, Any]:
        watch = ClaimWatch(cp, ns, device_capacities(slices())).start()
        try:
            out = scenario(scheduler)
        finally:
            ledger = watch.stop()
        return {**out, "claim_overlaps": [str(o) for o in ledger.overlaps],
                "most_claims_allocated": ledger.most_allocated}

    return run


# -- a DRA case: objects, claims, pods in waves --------------------------------------------------


@dataclass(frozen=True)
class CasePod:
    name: str
    #: pod claim name -> ("claim" | "template", the object's name without the run prefix)
    claims: dict[str, tuple[str, str]]
    wave: int = 1
    #: the node (1-based) the pod is expected on; 0: it stays pending (the wait for a wave ends when
    #: the others are bound and these have a PodScheduled message)
    node: int = 0
    #: extended resources the container requests (DRA-backed: the scheduler makes the claim)
    extended: dict[str, str] = field(default_factory=dict)


@dataclass
class DraCase:
    """A DRA cluster for one test: ``objects(ns, nodes)`` the cluster-scoped ones (ResourceSlices,
    DeviceClasses, DeviceTaintRules; as (plural, object)), ``claims(ns, run)`` the namespaced
    ResourceClaims and ResourceClaimTemplates (plural, object), named ``<run>-...`` per scheduler run."""

    name: str
    nodes: int
    objects: Callable[[str, list[str]], list[tuple[str, dict[str, Any]]]]
    claims: Callable[[str, str], list[tuple[str, dict[str, Any]]]]
    pods: list[CasePod]
    created: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def create_objects(self, cp: ControlPlane, ns: str, nodes: list[str]) -> None:
        self.created = []
        for plural, obj in self.objects(ns, nodes):
            cp.api("POST", f"{RESOURCE}/{plural}", obj)
            self.created.append((plural, obj))

    def delete_objects(self, cp: ControlPlane) -> None:
        for plural, obj in self.created:
            with contextlib.suppress(ApiError):
                cp.api("DELETE", f"{RESOURCE}/{plural}/{obj['metadata']['name']}")

    def slices(self) -> list[dict[str, Any]]:
        return [obj for plural, obj in self.created if plural == "resourceslices"]

    def create_claims(self, cp: ControlPlane, ns: str, run: str) -> None:
        for plural, obj in self.claims(ns, run):
            cp.api("POST", f"{RESOURCE}/namespaces/{ns}/{plural}", obj)

    def create_pods(self, cp: ControlPlane, ns: str, scheduler: str, run: str, wave: int | None = None) -> None:
        for p in self.pods:
            if wave is None or p.wave == wave:
                sources = [{"name": claim, ("resourceClaimName" if kind == "claim" else
                                            "resourceClaimTemplateName"): f"{run}-{obj}"}
                           for claim, (kind, obj) in p.claims.items()]
                body = pod_manifest(p.name, ns, scheduler_name=scheduler, requests={"cpu": "100m", **p.extended},
                                    limits=p.extended or None, node_selector={GROUP: ns},
                                    extra_spec={"resourceClaims": sources} if sources else None)
                if p.claims:
                    body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [
                        {"name": claim} for claim in p.claims]
                cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)

    def run(self, cp: ControlPlane, ns: str, nodes: list[str], scheduler: str) -> dict[str, Any]:
        """Claims, then each wave of pods, each wave waited for (its pods bound, or told why they
        wait); the outcome once nothing else happens."""
        release_claims(cp, ns)  # the previous run's
        run = scheduler.split("-")[0]  # "ks" (kube-scheduler) or "kst" (kubesched)
        self.create_claims(cp, ns, run)
        for wave in sorted({p.wave for p in self.pods}):
            self.create_pods(cp, ns, scheduler, run, wave)
            names = {p.name: not p.node for p in self.pods if p.wave <= wave}
            self.wait_settled(cp, ns, scheduler, names)
        time.sleep(2.0)  # nothing else happens
        return outcome(cp, ns, nodes, run)

    def wait_settled(self, cp: ControlPlane, ns: str, scheduler: str, names: dict[str, bool]) -> None:
        def settled() -> bool:
            pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
            return all(n in pods and (bool(reason(pods[n])) if pending else bool(pods[n]["spec"].get("nodeName")))
                       for n, pending in names.items())

        try:
            cp.wait_for(settled, 90, 0.3, f"{scheduler}: {self.name} settled")
        except TimeoutError as e:  # say where each pod and claim is
            state = {p["metadata"]["name"]: (p["spec"].get("nodeName"), reason(p)) for p in pods_in(cp, ns)}
            status = {n: c.get("status") for n, c in claims_in(cp, ns).items()}
            raise AssertionError(f"{e}\npods: {state}\nclaims' status: {status}") from e


def pod_claim_names(pod: dict[str, Any]) -> dict[str, str]:
    """pod claim name -> the ResourceClaim's name (named by the pod, or from its template: pod status);
    ``extended-resources`` -> the claim the scheduler made for DRA-backed extended resources."""
    status = pod.get("status") or {}
    made = {s["name"]: s.get("resourceClaimName") or "" for s in status.get("resourceClaimStatuses") or []}
    out = {s["name"]: str(s.get("resourceClaimName") or made.get(s["name"], ""))
           for s in pod["spec"].get("resourceClaims") or []}
    if status.get("extendedResourceClaimStatus"):
        out["extended-resources"] = str(status["extendedResourceClaimStatus"].get("resourceClaimName") or "")
    return out


def outcome(cp: ControlPlane, ns: str, nodes: list[str], run: str = "") -> dict[str, Any]:
    """``outcome_of`` the namespace's pods and claims on the control plane, messages from their
    PodScheduled condition (a claim named in one, ``<ns>/<run>-x``, as ``<ns>/x``: runs differ in it)."""
    pods = pods_in(cp, ns)
    reasons = {p["metadata"]["name"]: reason(p).replace(f"{ns}/{run}-", f"{ns}/") if run else reason(p) for p in pods}
    return outcome_of(pods, claims_in(cp, ns), nodes, reasons)


def outcome_of(pods: list[dict[str, Any]], claims: dict[str, dict[str, Any]], nodes: list[str],
               reasons: dict[str, str]) -> dict[str, Any]:
    """Per pod: its node (1-based index, 0 when pending), its message when pending, and each of its
    claims' allocation (request, node index of the pool, device, consumed capacity, tolerations);
    ``problems``: a bound pod's claim not allocated, with devices of another node, or not reserved
    for it; a pending pod's claim allocated and reserved for nobody."""
    index = {name: i for i, name in enumerate(nodes, 1)}
    out: dict[str, Any] = {}
    problems: list[str] = []
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
        allocations: dict[str, Any] = {}
        for pod_claim, claim_name in sorted(pod_claim_names(pod).items()):
            claim = claims.get(claim_name) or {}
            alloc = (claim.get("status") or {}).get("allocation")
            results = (alloc or {}).get("devices", {}).get("results") or []
            allocations[pod_claim] = [
                {"request": r["request"], "node": index.get(r["pool"], r["pool"]), "device": r["device"],
                 **{k: r[k] for k in ("consumedCapacity", "tolerations", "adminAccess") if k in r}}
                for r in results]
            if node and not alloc:
                problems.append(f"{name}: claim {claim_name!r} not allocated")
            elif node:
                if {r["pool"] for r in results} - {node}:
                    problems.append(f"{name} on {node} has devices of {sorted({r['pool'] for r in results})}")
                reserved = {r["uid"] for r in claim["status"].get("reservedFor") or []}
                if pod["metadata"]["uid"] not in reserved:
                    problems.append(f"{name} not in its claim {claim_name!r}'s reservedFor")
            elif alloc and not (claim.get("status") or {}).get("reservedFor"):
                problems.append(f"{name} pending, its claim {claim_name!r} allocated and reserved for nobody")
        out[name] = {"node": index.get(node, 0) if node else 0, "reason": "" if node else reasons.get(name, ""),
                     "claims": allocations}
    return {"pods": out, "problems": problems}


def run_both_with_objects(
    cp: ControlPlane, ns: str, tmp_path: Path, kubeconfig: Path, objects: list[tuple[str, dict[str, Any]]],
    scenario: Callable[[str], dict[str, Any]], profile: dict[str, Any] | None = None,
    metrics: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run_both`` (``profile``: more fields of both schedulers' profile) with the DRA ``objects``
    ((plural, object) under resource.k8s.io/v1) created first and, whatever happens, the pods, their
    claims and the objects removed after."""
    for plural, obj in objects:
        cp.api("POST", f"{RESOURCE}/{plural}", obj)
    try:
        return run_both(cp, ns, tmp_path, kubeconfig, scenario, profile, metrics)
    finally:
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
        cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")
        release_claims(cp, ns)
        for plural, obj in objects:
            cp.api("DELETE", f"{RESOURCE}/{plural}/{obj['metadata']['name']}")
