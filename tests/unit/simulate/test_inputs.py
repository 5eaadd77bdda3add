"""load_cluster: the files users already have, and exact error messages for the ones that are wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.plugins.coscheduling.podgroup import POD_GROUP_KIND
from kubesched.simulate.inputs.dump import ClusterInput, ClusterInputError, load_cluster
from kubesched.snapshot.pod import PodInfo, parse_timestamp

DATA = Path(__file__).parent / "data"


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [
        f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        if "namespace" in o["metadata"]
        else o["metadata"]["name"]
        for o in objs
    ]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def load_error(path: Path) -> str:
    with pytest.raises(ClusterInputError) as exc:
        load_cluster(path, [POD_GROUP_KIND])
    return str(exc.value)


NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
status:
  allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  containers:
  - name: app
    image: app
    resources:
      requests: {{cpu: "{cpu}"}}
"""


# -- accepted inputs --------------------------------------------------------------------------------


def test_kubectl_get_nodes_pods_list() -> None:
    path = DATA / "kubectl_get_nodes_pods.yaml"
    c = load_cluster(path)
    assert isinstance(c, ClusterInput)
    assert names(c.nodes) == ["cp-1", "worker-1"]
    assert names(c.pods) == [
        "kube-system/etcd-cp-1",
        "kube-system/kube-proxy-x7k2p",
        "shop/web-5d9c8b7f6-abcde",
        "ml/trainer-q8w4z",
        "shop/report-28999200-zt5fq",
    ]
    assert c.objects == {}
    assert c.skipped == {}
    assert c.terminal_pods == 1
    assert c.source == str(path)
    assert c.summary() == "2 nodes, 5 pods (1 terminal)"
    # Objects are kept whole (managedFields, status, ownerReferences...), uids from the file kept.
    web = c.pods[2]
    assert web["metadata"]["managedFields"][0]["manager"] == "kube-controller-manager"
    assert web["metadata"]["uid"] == "6e5d4c3b-2a19-4f8e-8d7c-6b5a49382716"
    assert c.nodes[0]["status"]["conditions"][1]["type"] == "Ready"
    # Bound / pending / terminal pods parse as the simulator will read them.
    infos = [PodInfo.from_raw(p) for p in c.pods]
    assert [i.node_name for i in infos] == ["cp-1", "worker-1", "worker-1", "", "worker-1"]
    assert [i.terminal for i in infos] == [False, False, False, False, True]
    assert infos[3].requests.scalar == {"nvidia.com/gpu": 1}


def test_same_list_as_json_gives_the_same_objects(tmp_path: Path) -> None:
    doc = yaml.safe_load((DATA / "kubectl_get_nodes_pods.yaml").read_text())
    path = write(tmp_path, "dump.json", json.dumps(doc))
    from_json = load_cluster(path)
    from_yaml = load_cluster(DATA / "kubectl_get_nodes_pods.yaml")
    assert from_json.nodes == from_yaml.nodes
    assert from_json.pods == from_yaml.pods
    assert from_json.terminal_pods == 1


def test_kinds_no_plugin_declared_are_counted_not_loaded() -> None:
    c = load_cluster(DATA / "multi_doc.yaml")  # no plugin of the configuration reads PodGroups
    assert c.objects == {}
    assert c.skipped["scheduling.x-k8s.io/v1alpha1 PodGroup"] == 1


def test_multi_document_yaml_skips_unmodelled_objects_and_fills_defaults() -> None:
    c = load_cluster(DATA / "multi_doc.yaml", [POD_GROUP_KIND])
    assert names(c.nodes) == ["small-1"]
    assert names(c.pods) == ["team-a/api-1", "team-a/api-2", "default/tools"]
    assert list(c.objects["PodGroup"]) == ["team-a/gang"]
    assert c.skipped == {"apps/v1 Deployment": 2, "v1 Service": 1}
    assert c.terminal_pods == 0
    assert c.summary() == "1 nodes, 3 pods, 1 PodGroup; skipped: 2 apps/v1 Deployment, 1 v1 Service"
    api1, api2, tools = (p["metadata"] for p in c.pods)
    # Deterministic uids, default namespace.
    assert (api1["uid"], api2["uid"], tools["uid"]) == ("sim-team-a-api-1", "sim-team-a-api-2", "sim-default-tools")
    assert tools["namespace"] == "default"
    # An unquoted timestamp stays the string it was written as.
    assert api2["creationTimestamp"] == "2025-01-02T03:04:05Z"
    # Pods without a creationTimestamp are stamped after the latest one, in file order.
    assert api1["creationTimestamp"] == "2025-01-02T03:04:06Z"
    assert tools["creationTimestamp"] == "2025-01-02T03:04:07Z"


def test_creation_order_is_file_order_when_no_pod_has_a_timestamp(tmp_path: Path) -> None:
    path = write(
        tmp_path, "pods.yaml", "---\n".join(POD.format(name=f"p{i}", namespace="ns", cpu="1") for i in (3, 1, 2))
    )
    c = load_cluster(path)
    stamps = [p["metadata"]["creationTimestamp"] for p in c.pods]
    assert stamps == ["2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z", "2024-01-01T00:00:03Z"]
    order = sorted(c.pods, key=lambda p: parse_timestamp(p["metadata"]["creationTimestamp"]))
    assert names(order) == ["ns/p3", "ns/p1", "ns/p2"]


def test_directory_is_read_recursively_in_sorted_order() -> None:
    path = DATA / "cluster_dir"
    c = load_cluster(path)
    # nodes.json (a NodeList whose items carry no kind), then pods/team-a.yaml, then pods/team-b.yml;
    # README.md and the hidden .snapshots directory are ignored.
    assert names(c.nodes) == ["n1", "n2"]
    assert c.nodes[1]["spec"]["unschedulable"] is True
    assert names(c.pods) == ["team-a/a-1", "team-a/a-2", "team-b/b-1"]
    assert c.skipped == {"v1 ConfigMap": 1}
    assert c.source == f"{path} (3 files)"
    assert c.pods[0]["spec"]["nodeName"] == "n1"
    # Stamped after the only timestamp in the input.
    assert c.pods[1]["metadata"]["creationTimestamp"] == "2025-02-01T00:00:01Z"
    assert c.pods[2]["metadata"]["creationTimestamp"] == "2025-02-01T00:00:02Z"


def test_pod_list_from_the_api_and_empty_inputs(tmp_path: Path) -> None:
    pod = yaml.safe_load(POD.format(name="p", namespace="ns", cpu="1"))
    del pod["apiVersion"], pod["kind"]
    path = write(tmp_path, "pods.json", json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [pod]}))
    assert names(load_cluster(path).pods) == ["ns/p"]
    empty = load_cluster(write(tmp_path, "empty.yaml", "# nothing yet\n---\n...\n"))
    assert (empty.nodes, empty.pods, empty.objects, empty.skipped) == ([], [], {}, {})


# -- errors -----------------------------------------------------------------------------------------


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: a: b\n")
    problem = (
        "mapping values are not allowed in this context"
        if yaml.__with_libyaml__
        else "mapping values are not allowed here"
    )
    assert load_error(path) == f"{path}: line 5, column 12: invalid YAML: {problem}"


def test_malformed_yaml_in_a_later_document_with_context(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", NODE.format(name="n1") + "---\nkind: Pod\nmetadata:\n  name: [a, b\nspec: {}\n")
    problem = "did not find expected ',' or ']'" if yaml.__with_libyaml__ else "expected ',' or ']', but got ':'"
    assert (
        load_error(path)
        == f"{path}: line 11, column 5: invalid YAML: {problem} (while parsing a flow sequence at line 10)"
    )


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", '{\n  "apiVersion": "v1",\n  "kind": "List",,\n  "items": []\n}\n')
    assert load_error(path) == f"{path}: line 3, column 18: invalid JSON: unexpected character, expected a string key"


def test_pod_with_invalid_cpu_names_file_pod_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.yaml",
        POD.format(name="ok", namespace="shop", cpu="1")
        + "---\n"
        + POD.format(name="web-1", namespace="shop", cpu="1x"),
    )
    assert load_error(path) == (
        f'{path}: document 2 (Pod shop/web-1): container "app": requests.cpu: invalid quantity "1x": unknown suffix "x"'
    )


def test_invalid_cpu_inside_a_list_names_the_item(tmp_path: Path) -> None:
    doc = yaml.safe_load((DATA / "kubectl_get_nodes_pods.yaml").read_text())
    doc["items"][4]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1x"
    path = write(tmp_path, "dump.json", json.dumps(doc))
    assert load_error(path) == (
        f'{path}: document 1, items[4] (Pod shop/web-5d9c8b7f6-abcde): container "web": requests.cpu: '
        'invalid quantity "1x": unknown suffix "x"'
    )


def test_node_with_invalid_allocatable_names_node_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.yaml", NODE.format(name="n1").replace("memory: 8Gi", "memory: 8 Gi"))
    assert load_error(path) == (
        f'{path}: document 1 (Node n1): status.allocatable.memory: invalid quantity "8 Gi": '
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


def test_node_without_name(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.yaml", NODE.format(name="n1") + "---\n" + NODE.format(name='""'))
    assert load_error(path) == f"{path}: document 2 (Node): metadata.name is required"


def test_document_that_is_a_list(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.yaml", "- " + NODE.format(name="n1").replace("\n", "\n  "))
    assert load_error(path) == (
        f"{path}: document 1: expected a Kubernetes object (a mapping with apiVersion and kind), got a list; "
        "put several objects in a v1 List (items: [...]) or in separate YAML documents"
    )


def test_unknown_top_level_type(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.yaml", NODE.format(name="n1") + "---\njust some notes\n")
    assert load_error(path) == (
        f"{path}: document 2: expected a Kubernetes object (a mapping with apiVersion and kind), "
        "got a string ('just some notes')"
    )
    path = write(tmp_path, "number.json", "42")
    assert load_error(path) == (
        f"{path}: document 1: expected a Kubernetes object (a mapping with apiVersion and kind), got a number (42)"
    )


def test_mapping_without_kind_or_api_version(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "metadata:\n  name: n1\n")
    assert load_error(path) == f'{path}: document 1: not a Kubernetes object: missing "apiVersion" and "kind"'
    path = write(tmp_path, "y.yaml", "apiVersion: v1\nitems: []\n")
    assert load_error(path) == f'{path}: document 1: not a Kubernetes object: missing "kind"'
    path = write(tmp_path, "z.yaml", "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: p}\n")
    assert load_error(path) == f'{path}: document 1, items[0]: not a Kubernetes object: missing "apiVersion"'


def test_duplicate_node_names_both_places(tmp_path: Path) -> None:
    first = write(tmp_path, "d/a.yaml", NODE.format(name="n1"))
    second = write(tmp_path, "d/b/c.yaml", NODE.format(name="n2") + "---\n" + NODE.format(name="n1"))
    assert (
        load_error(tmp_path / "d")
        == f"{second}: document 2 (Node n1): duplicate Node n1, first defined at {first}: document 1"
    )


def test_duplicate_pods_both_places(tmp_path: Path) -> None:
    pod = POD.format(name="web", namespace="shop", cpu="1")
    path = write(
        tmp_path,
        "pods.yaml",
        f"apiVersion: v1\nkind: List\nitems:\n- {pod.replace(chr(10), chr(10) + '  ')}\n---\n{pod}",
    )
    assert load_error(path) == (
        f"{path}: document 2 (Pod shop/web): duplicate Pod shop/web, first defined at {path}: document 1, items[0]"
    )
    # Same name in another namespace is a different pod.
    path = write(tmp_path, "ok.yaml", pod + "---\n" + POD.format(name="web", namespace="other", cpu="1"))
    assert names(load_cluster(path).pods) == ["shop/web", "other/web"]


def test_duplicate_uid(tmp_path: Path) -> None:
    a = POD.format(name="a", namespace="ns", cpu="1").replace("  namespace: ns\n", "  namespace: ns\n  uid: u-1\n")
    b = POD.format(name="b", namespace="ns", cpu="1").replace("  namespace: ns\n", "  namespace: ns\n  uid: u-1\n")
    path = write(tmp_path, "pods.yaml", a + "---\n" + b)
    assert (
        load_error(path)
        == f"{path}: document 2 (Pod ns/b): metadata.uid 'u-1' is also used by Pod ns/a at {path}: document 1"
    )


def test_invalid_pod_group(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pg.yaml",
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: g, namespace: ns}\nspec: {minMember: two}\n",
    )
    assert (
        load_error(path)
        == f"{path}: document 1 (PodGroup ns/g): spec.minMember must be a non-negative integer, got 'two'"
    )


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    assert load_error(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: no such file or directory"
    (tmp_path / "empty").mkdir()
    write(tmp_path, "empty/notes.txt", "hello")
    assert (
        load_error(tmp_path / "empty") == f"{tmp_path / 'empty'}: directory contains no *.yaml, *.yml or *.json files"
    )


@pytest.mark.parametrize("kind", ["Node", "Pod"])
def test_labels_of_the_wrong_type_name_file_object_and_field(tmp_path: Path, kind: str) -> None:
    body = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: 'zone=a'}\n"
        if kind == "Node"
        else "apiVersion: v1\nkind: Pod\nmetadata: {name: web-2, namespace: shop, labels: 'app=web'}\n"
        "spec: {containers: [{name: c}]}\n"
    )
    path = write(tmp_path, "bad.yaml", body)
    what = "Node n1" if kind == "Node" else "Pod shop/web-2"
    want = f"{path}: document 1 ({what}): metadata.labels: expected an object of strings, got string"
    assert load_error(path) == want


def test_a_pod_bound_to_a_node_not_in_the_input_is_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec: {nodeName: ghost, containers: []}\n",
    )
    (warning,) = load_cluster(path).warnings
    assert warning.startswith(f"{path}: document 1 (Pod shop/web): bound to node 'ghost', which is not in the input")


# -- kinds a dump lacks -------------------------------------------------------------------------------


def test_kinds_the_pods_need_but_the_dump_lacks_are_named_once_each(tmp_path: Path) -> None:
    from kubesched.plugins.defaultpreemption import DefaultPreemption
    from kubesched.plugins.volumebinding.storage import PV_KIND, PVC_KIND, STORAGE_CLASS_KIND

    (pdb_kind,) = DefaultPreemption.object_kinds
    claim = "  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]\n"
    gang = "  labels: {scheduling.x-k8s.io/pod-group: g}\n"
    docs = [
        POD.format(name="db-0", namespace="shop", cpu="1") + claim,
        POD.format(name="db-1", namespace="shop", cpu="1") + claim,
        POD.format(name="w-0", namespace="shop", cpu="1").replace("  namespace: shop\n", "  namespace: shop\n" + gang),
        POD.format(name="urgent", namespace="shop", cpu="1") + "  priority: 1000\n",
    ]
    path = write(tmp_path, "dump.yaml", "---\n".join(docs))
    kinds = [PVC_KIND, PV_KIND, STORAGE_CLASS_KIND, POD_GROUP_KIND, pdb_kind]
    assert load_cluster(path, kinds).warnings == [
        "no PersistentVolumeClaims in the input: pods with claims wait for them (2 pods affected)",
        "no PersistentVolumes in the input: claims have no volume to be bound to (2 pods affected)",
        "no StorageClasses in the input: claims have no class to provision from (2 pods affected)",
        "no PodGroups in the input: pods that name a group wait for it (1 pod affected)",
        "no PodDisruptionBudgets in the input: preemption respects no disruption budget (1 pod affected)",
    ]
    # Kinds no configured plugin declares are not asked for; a kind that is present is not missing.
    assert load_cluster(path).warnings == []
    pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\n"
    path = write(tmp_path, "dump2.yaml", "---\n".join([*docs[:2], pvc]))
    assert [w.split(":")[0] for w in load_cluster(path, kinds).warnings] == [
        "no PersistentVolumes in the input", "no StorageClasses in the input"
    ]


# -- objects the apiserver would refuse (api/validation.py), one line each -----------------------------


def _pod_with(tmp_path: Path, spec_yaml: str) -> str:
    """The load error of pod shop/web whose spec has ``spec_yaml`` added (indented by 2)."""
    return load_error(write(tmp_path, "pod.yaml", POD.format(name="web", namespace="shop", cpu="1") + spec_yaml))


INVALID_POD_CASES = {
    "negative request": (
        POD.format(name="web", namespace="shop", cpu="-1"),
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    ),
    "negative limit": (
        POD.format(name="web", namespace="shop", cpu="1").replace("requests:",
                                                                   "limits: {memory: -1Gi}\n      requests:"),
        'spec.containers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0',
    ),
    "request above its limit": (
        POD.format(name="web", namespace="shop", cpu="2").replace("requests:", "limits: {cpu: 1}\n      requests:"),
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
    "extended request not its limit": (
        POD.format(name="web", namespace="shop", cpu="1").replace(
            'requests: {cpu: "1"}', 'requests: {cpu: "1", example.com/gpu: 1}\n      limits: {example.com/gpu: 2}'),
        'spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2',
    ),
    "fractional extended resource": (
        POD.format(name="web", namespace="shop", cpu="1").replace('requests: {cpu: "1"}',
                                                                   'requests: {cpu: "1", example.com/gpu: 500m}'),
        'spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "500m": must be an integer',
    ),
    "negative overhead": (
        POD.format(name="web", namespace="shop", cpu="1") + "  overhead: {cpu: -250m}\n",
        'spec.overhead[cpu]: Invalid value: "-250m": must be greater than or equal to 0',
    ),
    "whenUnsatisfiable": (
        POD.format(name="web", namespace="shop", cpu="1")
        + "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}\n",
        'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: '
        '"DoNotSchedule", "ScheduleAnyway"',
    ),
    "maxSkew": (
        POD.format(name="web", namespace="shop", cpu="1")
        + "  topologySpreadConstraints:\n  - {maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}\n",
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
    ),
    "node affinity operator": (
        POD.format(name="web", namespace="shop", cpu="1")
        + "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        "        nodeSelectorTerms:\n        - matchExpressions: [{key: zone, operator: Equals, values: [a]}]\n",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        '.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator',
    ),
    "pod affinity operator": (
        POD.format(name="web", namespace="shop", cpu="1")
        + "  affinity:\n    podAntiAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
        "      - weight: 1\n        podAffinityTerm:\n          topologyKey: zone\n"
        "          labelSelector: {matchExpressions: [{key: app, operator: Gt, values: ['1']}]}\n",
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
        '.labelSelector.matchExpressions[0].operator: Invalid value: "Gt": not a valid selector operator',
    ),
    "toleration operator": (
        POD.format(name="web", namespace="shop", cpu="1") + "  tolerations: [{key: gpu, operator: Contains}]\n",
        'spec.tolerations[0].operator: Unsupported value: "Contains": supported values: "Equal", "Exists"',
    ),
    "toleration effect": (
        POD.format(name="web", namespace="shop", cpu="1")
        + "  tolerations: [{key: gpu, operator: Exists, effect: NoScheduling}]\n",
        'spec.tolerations[0].effect: Unsupported value: "NoScheduling": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
    ),
    "preemptionPolicy": (
        POD.format(name="web", namespace="shop", cpu="1") + "  preemptionPolicy: Sometimes\n",
        'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
    ),
    "restartPolicy": (
        POD.format(name="web", namespace="shop", cpu="1") + "  restartPolicy: Forever\n",
        'spec.restartPolicy: Unsupported value: "Forever": supported values: "Always", "OnFailure", "Never"',
    ),
}


@pytest.mark.parametrize("case", INVALID_POD_CASES)
def test_a_pod_the_apiserver_would_refuse_gets_one_line(tmp_path: Path, case: str) -> None:
    body, error = INVALID_POD_CASES[case]
    path = write(tmp_path, "pods.yaml", POD.format(name="ok", namespace="shop", cpu="1") + "---\n" + body)
    assert load_error(path) == f"{path}: document 2 (Pod shop/web): {error}"


INVALID_NODE_CASES = {
    "no status": (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n",
        "status.allocatable: Required value: the Node has neither status.allocatable nor status.capacity, so "
        "nothing would fit on it (dump Nodes as the apiserver returns them)",
    ),
    "negative allocatable": (
        NODE.format(name="n2").replace('cpu: "4"', 'cpu: "-1"'),
        'status.allocatable[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    ),
    "negative capacity": (
        NODE.format(name="n2") + "  capacity: {memory: -8Gi}\n",
        'status.capacity[memory]: Invalid value: "-8Gi": must be greater than or equal to 0',
    ),
    "taint effect": (
        NODE.format(name="n2") + "spec:\n  taints: [{key: gpu, effect: NoScheduling}]\n",
        'spec.taints[0].effect: Unsupported value: "NoScheduling": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
    ),
    "taint without effect": (
        NODE.format(name="n2") + "spec:\n  taints: [{key: gpu}]\n",
        "spec.taints[0].effect: Required value",
    ),
}


@pytest.mark.parametrize("case", INVALID_NODE_CASES)
def test_a_node_the_apiserver_would_refuse_gets_one_line(tmp_path: Path, case: str) -> None:
    body, error = INVALID_NODE_CASES[case]
    path = write(tmp_path, "nodes.yaml", NODE.format(name="n1") + "---\n" + body)
    assert load_error(path) == f"{path}: document 2 (Node n2): {error}"


def test_a_node_with_capacity_only_is_sized_by_it(tmp_path: Path) -> None:
    # SetDefaults_NodeStatus: allocatable defaults to capacity.
    node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: '2'}}\n"
    path = write(tmp_path, "n.yaml", node)
    assert names(load_cluster(path).nodes) == ["n1"]


def test_several_errors_in_one_object_are_one_line(tmp_path: Path) -> None:
    body = POD.format(name="web", namespace="shop", cpu="-1") + "  preemptionPolicy: Sometimes\n  restartPolicy: X\n"
    path = write(tmp_path, "pods.yaml", body)
    assert load_error(path) == (
        f'{path}: document 1 (Pod shop/web): spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0 (and 2 more errors)"
    )


def test_lenient_skips_invalid_objects_with_a_count(tmp_path: Path) -> None:
    docs = [
        NODE.format(name="n1"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n",  # no status
        NODE.format(name="n1"),  # duplicate
        POD.format(name="ok", namespace="shop", cpu="1"),
        POD.format(name="neg", namespace="shop", cpu="-1"),
        POD.format(name="gold", namespace="shop", cpu="1") + "  priorityClassName: gold\n",  # refused by admission
        POD.format(name="bound", namespace="shop", cpu="1") + "  nodeName: n2\n",
    ]
    path = write(tmp_path, "dump.yaml", "---\n".join(docs))
    with pytest.raises(ClusterInputError):
        load_cluster(path)
    c = load_cluster(path, lenient=True)
    assert names(c.nodes) == ["n1"]
    assert names(c.pods) == ["shop/ok", "shop/bound"]
    skipped, bound = c.warnings
    assert skipped.startswith(
        f"skipped 4 invalid objects (--lenient): {path}: document 2 (Node n2): status.allocatable: Required value: "
    )
    assert f"{path}: document 3 (Node n1): duplicate Node n1, first defined at {path}: document 1" in skipped
    assert "(Pod shop/neg): spec.containers[0].resources.requests[cpu]" in skipped
    assert "(Pod shop/gold): spec.priorityClassName: no PriorityClass with name gold was found" in skipped
    assert bound.startswith(f"{path}: document 7 (Pod shop/bound): bound to node 'n2', which is not in the input")


# -- the commands: one line and exit 1, or --lenient ---------------------------------------------------


def _invoke(*args: str | Path) -> Any:
    from click.testing import CliRunner

    from kubesched.cli import main

    return CliRunner().invoke(main, [*map(str, args)], env={"COLUMNS": "200"}, catch_exceptions=False)


def test_simulate_refuses_a_node_without_status_and_lenient_skips_it(tmp_path: Path) -> None:
    # The case: a Node without status showed 3250m/0 and a cluster CPU of 106 %.
    docs = [NODE.format(name="n1"), "apiVersion: v1\nkind: Node\nmetadata: {name: bare}\n",
            POD.format(name="web", namespace="shop", cpu="1")]
    path = write(tmp_path, "dump.yaml", "---\n".join(docs))
    result = _invoke("simulate", "-q", "--cluster", path)
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [
        f"Error: {path}: document 2 (Node bare): status.allocatable: Required value: the Node has neither "
        "status.allocatable nor status.capacity, so nothing would fit on it (dump Nodes as the apiserver returns them)"
    ]
    result = _invoke("simulate", "-q", "--lenient", "--cluster", path, "--output", "json")
    assert result.exit_code == 0, result.output
    warning = f"skipped 1 invalid object (--lenient): {path}: document 2 (Node bare): status.allocatable: Required"
    assert [line for line in result.stderr.splitlines() if line.startswith("warning: ")] == [
        "warning: " + json.loads(result.stdout)["inputWarnings"][0]
    ]
    assert json.loads(result.stdout)["inputWarnings"][0].startswith(warning)
    assert json.loads(result.stdout)["summary"]["nodes"] == 1


def test_simulate_takes_a_dump_without_priority_classes_with_one_warning(tmp_path: Path) -> None:
    low = "  priorityClassName: low\n  priority: 100\n  preemptionPolicy: PreemptLowerPriority\n"
    docs = [NODE.format(name="n1"), POD.format(name="a", namespace="shop", cpu="1") + low,
            POD.format(name="b", namespace="shop", cpu="1") + low]
    result = _invoke("simulate", "-q", "--cluster", write(tmp_path, "dump.yaml", "---\n".join(docs)))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: no PriorityClasses in the input: priorities taken from the pods",
        # Pending pods of priority 100 may preempt: DefaultPreemption would read budgets.
        "warning: no PodDisruptionBudgets in the input: preemption respects no disruption budget (2 pods affected)",
    ]


def test_compare_capacity_and_sweep_take_lenient(tmp_path: Path) -> None:
    docs = [NODE.format(name="n1"), NODE.format(name="n2").replace('cpu: "4"', 'cpu: "-4"'),
            POD.format(name="web", namespace="shop", cpu="1")]
    path = write(tmp_path, "dump.yaml", "---\n".join(docs))
    config = write(tmp_path, "c.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    workload = write(tmp_path, "w.yaml", POD.format(name="more", namespace="shop", cpu="1"))
    commands = [
        ["compare", "-q", "--config", config, "--config", config, "--cluster", path],
        ["capacity", "-q", "--cluster", path, "--workload", workload],
        ["sweep", "-q", "--workers", "1", "--cluster", path],
    ]
    for argv in commands:
        refused = _invoke(*argv)
        assert refused.exit_code != 0 and "(Node n2): status.allocatable[cpu]: Invalid value" in refused.output, argv
        result = _invoke(*argv, "--lenient")
        assert result.exit_code == 0, (argv, result.output)
