"""kube-controller-manager's resourceclaim controller as the simulator runs it (claim_controller.py):
a claim stamped from the template with upstream's name shape, owner and annotation, the pod's
status naming it; the same names on every run; nothing when the claim exists or the template does not."""

from __future__ import annotations

from typing import Any

from kubesched.plugins.dynamicresources.claim_controller import claim_name, generate_name, stamp_claims

SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]}}
TEMPLATE = {"metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}}, "spec": SPEC}}


def pod(name: str = "trainer", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml", "uid": "u1"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                                        {"name": "own", "resourceClaimName": "by-hand"}]},
            "status": status or {}}


def objects(claims: dict[str, Any] | None = None, templates: bool = True) -> Any:
    store = {"ResourceClaim": claims or {}, "ResourceClaimTemplate": {"ml/one-gpu": TEMPLATE} if templates else {}}
    return lambda kind: store.get(kind, {})


def test_claim_is_stamped_from_the_template_and_named_in_the_pods_status() -> None:
    result = stamp_claims(pod(), objects())
    (claim,) = result.created
    name = claim["metadata"]["name"]
    assert name.startswith("trainer-gpu-") and len(name) == len("trainer-gpu-") + 5
    assert name == claim_name("ml", "trainer", "u1", "gpu")  # deterministic
    assert claim["metadata"]["namespace"] == "ml"
    assert claim["metadata"]["annotations"] == {"note": "x", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim["metadata"]["labels"] == {"team": "a"}
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": "u1", "controller": True}]
    assert claim["spec"] == SPEC and claim["spec"] is not SPEC
    assert dict(result.pod_status) == {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": name}]}


def test_existing_claim_of_the_pod_is_kept() -> None:
    owned = {"metadata": {"name": "trainer-gpu-abcde", "namespace": "ml",
                          "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                          "ownerReferences": [{"uid": "u1", "controller": True}]}}
    result = stamp_claims(pod(), objects({"ml/trainer-gpu-abcde": owned}))
    assert result.created == ()
    assert dict(result.pod_status) == {"resourceClaimStatuses": [{"name": "gpu",
                                                                  "resourceClaimName": "trainer-gpu-abcde"}]}
    named = pod(status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "x"}]})
    assert stamp_claims(named, objects()).pod_status == {}


def test_missing_template_creates_nothing() -> None:
    result = stamp_claims(pod(), objects(templates=False))
    assert result.created == () and not result.pod_status


def test_long_names_are_shortened_as_upstream() -> None:
    base = generate_name("p" * 60, "c" * 20)
    # 57 * 60 // 82 = 41 and 57 * 20 // 82 = 13 characters, as handleClaim's integer arithmetic
    assert base == "p" * 41 + "-" + "c" * 13
    assert len(claim_name("ns", "p" * 60, "u", "c" * 20)) == 60
