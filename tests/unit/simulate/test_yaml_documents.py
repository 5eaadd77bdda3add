"""simulate/inputs/yaml_documents.py: the same documents (and the same errors) as ``yaml.load_all`` with
the dump loader, whichever YAML a file uses; the direct builder handles plain cluster dumps."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from kubesched.simulate.inputs import yaml_documents
from kubesched.simulate.inputs.yaml_documents import ManifestLoader, load_documents

KUBECTL_LIST = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: node-1
    creationTimestamp: "2025-06-01T00:00:00Z"
    labels: {kubernetes.io/hostname: node-1, topology.kubernetes.io/zone: a}
  spec:
    unschedulable: true
    taints: [{key: k, value: v, effect: NoSchedule}]
  status:
    allocatable: {cpu: 3910m, memory: 15Gi, pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: default, creationTimestamp: 2025-06-01T00:00:01Z}
  spec:
    priority: 1000
    containers:
    - name: app
      resources: {requests: {cpu: 100m}}
      ports: [{containerPort: 8080, hostPort: 0x50}]
metadata:
  resourceVersion: ""
"""

STREAMS = [
    KUBECTL_LIST,
    "",
    "---\n---\nnull\n---\n~\n---\na: 1\n",
    "plain scalar document",
    "- 1\n- -0x1F\n- 0o17\n- 017\n- 1_000\n- 1:30\n- +12\n- 0b101\n",
    "- 1.5\n- -.inf\n- .NaN\n- 1e3\n- 6.8523015e+5\n- 190:20:30.15\n",
    "- yes\n- No\n- on\n- OFF\n- true\n- ~\n- null\n- ''\n- '1'\n- \"true\"\n",
    "t: 2001-12-14t21:59:43.10-05:00\nd: 2002-12-14\n",
    "dup: 1\ndup: 2\n",
    "1: int key\n2.5: float key\ntrue: bool key\n~: null key\n",
    "base: &b {x: 1, y: 2}\nuse: *b\nlist: &l [1, 2]\nagain: *l\n",
    "base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  y: 3\n",
    "merged:\n  <<: [{a: 1}, {b: 2}]\n  c: 3\n",
    "=: value key\nother: 1\n",
    "s: !!set {a, b}\n",
    "o: !!omap [{a: 1}, {b: 2}]\n",
    "p: !!pairs [{a: 1}, {a: 2}]\n",
    "b: !!binary aGVsbG8=\n",
    "explicit: !!str 123\nint: !!int '7'\nfloat: !!float '1'\n",
    "? [a, b]\n: unhashable key\n",
    "? {a: 1}\n: unhashable key\n",
    "local: !thing 1\n",
    "m: !!str {a: 1}\n",
    "bad: !!int abc\n",
    "a: &a\n  self: *a\n",
    "- &x [*x]\n",
    "undefined: *nowhere\n",
    "a: [1, 2\n",
    "a: 1\n---\nb: [\n",
    "a: 1\n---\nlocal: !thing 1\n---\nc: 3\n",
    "deep: " + "[" * 200 + "]" * 200 + "\n",
]


def _outcome(load: Any) -> tuple[str, Any]:
    try:
        return "ok", list(load())
    except Exception as e:  # the error itself is what is compared
        return "error", (type(e), str(e))


def _same(a: Any, b: Any, seen: set[tuple[int, int]] | None = None) -> bool:
    """Equality that also holds for NaN (which != itself), checks types (1 == 1.0 == True) and
    follows recursive structures (a pair already being compared is taken as equal)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict | list | tuple):
        seen = set() if seen is None else seen
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
        if isinstance(a, dict):
            return list(a) == list(b) and all(_same(a[k], b[k], seen) for k in a)
        return len(a) == len(b) and all(_same(x, y, seen) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("text", STREAMS)
def test_the_same_documents_or_error_as_yaml_load_all(text: str) -> None:
    for data in (text, text.encode()):
        want = _outcome(lambda d=data: yaml.load_all(d, Loader=ManifestLoader))
        got = _outcome(lambda d=data: load_documents(d, ManifestLoader))
        assert got[0] == want[0], (got, want)
        if want[0] == "error":
            assert got[1] == want[1]
        else:
            assert _same(got[1], want[1]), (got, want)


def test_aliases_share_one_object_as_pyyaml_makes_them() -> None:
    [doc] = load_documents("base: &b {x: 1}\nuse: *b\nl: &l [1]\nm: *l\n", ManifestLoader)
    assert doc["base"] is doc["use"] and doc["l"] is doc["m"]


def test_a_cluster_dump_is_built_without_the_full_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, node: Any) -> Any:
        raise AssertionError("full constructor used")

    monkeypatch.setattr(ManifestLoader, "construct_document", refuse)
    [doc] = load_documents(KUBECTL_LIST.encode(), ManifestLoader)
    assert doc["items"][1]["metadata"]["creationTimestamp"] == "2025-06-01T00:00:01Z"  # kept a string
    assert doc["items"][1]["spec"]["containers"][0]["ports"][0]["hostPort"] == 80


def test_unsupported_yaml_falls_back_per_document(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[Any] = []
    full = ManifestLoader.construct_document

    def counting(self: Any, node: Any) -> Any:
        used.append(node)
        return full(self, node)

    monkeypatch.setattr(ManifestLoader, "construct_document", counting)
    docs = list(load_documents("a: 1\n---\nm:\n  <<: {x: 1}\n---\nc: 3\n", ManifestLoader))
    assert docs == [{"a": 1}, {"m": {"x": 1}}, {"c": 3}]
    assert len(used) == 1
    assert yaml_documents._Unsupported.__doc__


def test_map_keys_are_strings_as_kubectl_reads_them() -> None:
    """YAML 1.1 reads ``on:``/``yes:``/``1:`` keys as bools and numbers; kubectl's reader
    (sigs.k8s.io/yaml) turns them into JSON's strings, so a label ``on: x`` is the label
    ``"true": "x"`` (a non-string key once failed every scheduling attempt of its pod)."""
    [doc] = load_documents("labels: {on: x, No: y, 7: z, 2.5: w, app: web}\n", ManifestLoader)
    assert doc == {"labels": {"true": "x", "false": "y", "7": "z", "2.5": "w", "app": "web"}}
    with pytest.raises(yaml.YAMLError, match="found a null key"):
        list(load_documents("labels: {~: x}\n", ManifestLoader))
