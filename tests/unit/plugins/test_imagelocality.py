"""ImageLocality (mirrors upstream imagelocality/image_locality_test.go) and the node table's image
index it reads (the bookkeeping of upstream backend/cache/cache.go addNodeImageStates /
removeNodeImageStates)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.imagelocality import ImageLocality, normalized_image_name
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeSpecError, NodeTable
from kubesched.testing import framework_for, new_plugin, node, pod, table_of

MB = 1024 * 1024


def image_node(name: str, *images: tuple[list[str], int]) -> dict[str, Any]:
    raw = node(name)
    if images:
        raw["status"]["images"] = [{"names": names, "sizeBytes": size * MB} for names, size in images]
    return raw


def spec_pod(containers: Sequence[str], init: Sequence[str] = (), volumes: Sequence[str] = ()) -> PodInfo:
    return PodInfo.from_raw(
        pod(
            "p",
            containers=[{"name": f"c{i}", "image": im} for i, im in enumerate(containers)],
            initContainers=[{"name": f"i{i}", "image": im} for i, im in enumerate(init)],
            volumes=[{"name": f"v{i}", "image": {"reference": im}} for i, im in enumerate(volumes)],
        )
    )


# The node statuses of the upstream test.
N_40_300_2000 = (
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
    (["gcr.io/2000:latest"], 2000),
)
N_250_10 = ((["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10))
N_600_40_900 = ((["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900))
N_300_600_900 = ((["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900))
N_4000_30 = ((["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30))
N_20_30_40 = ((["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40))
NO_IMAGES: tuple[tuple[list[str], int], ...] = ()


def scores(p: PodInfo, *statuses: tuple[tuple[list[str], int], ...]) -> list[int]:
    table = table_of(*(image_node(f"node{i + 1}", *s) for i, s in enumerate(statuses)))
    plugin = new_plugin(ImageLocality, table=table)
    out = plugin.score_batch(CycleState(), p, table, table.alive_rows())
    return [int(x) for x in out]


@pytest.mark.parametrize(
    ("p", "statuses", "expected"),
    [
        # two images spread on two nodes, prefer the larger image one
        (spec_pod(["gcr.io/40", "gcr.io/250"]), (N_40_300_2000, N_250_10), [0, 5]),
        # two images on one node, prefer this node
        (spec_pod(["gcr.io/40", "gcr.io/300"]), (N_40_300_2000, N_250_10), [7, 0]),
        # if exceed limit, use limit
        (spec_pod(["gcr.io/10", "gcr.io/4000"]), (N_4000_30, N_250_10), [100, 0]),
        # if exceed limit, use limit (with node which has no images present)
        (spec_pod(["gcr.io/10", "gcr.io/4000"]), (N_4000_30, N_250_10, NO_IMAGES), [66, 0, 0]),
        # pod with multiple large images, node2 is preferred
        (spec_pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]), (N_600_40_900, N_300_600_900, NO_IMAGES), [32, 36, 0]),
        # pod with multiple small images
        (spec_pod(["gcr.io/30", "gcr.io/40"]), (N_20_30_40, N_4000_30), [1, 0]),
        # pod with ImageVolume
        (spec_pod(["gcr.io/30"], volumes=["gcr.io/300"]), (N_300_600_900, N_4000_30), [6, 0]),
        # same images as ImageVolume pod but as regular container images
        (spec_pod(["gcr.io/30", "gcr.io/300"]), (N_300_600_900, N_4000_30), [6, 0]),
        # include InitContainers: two images spread on two nodes, prefer the larger image one
        (spec_pod(["gcr.io/30"], init=["gcr.io/300"]), (N_40_300_2000, N_20_30_40), [6, 0]),
    ],
)
def test_image_locality_priority(p: PodInfo, statuses: tuple[Any, ...], expected: list[int]) -> None:
    assert scores(p, *statuses) == expected


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:" + "ab" * 32, "root@sha256:" + "ab" * 32),
    ],
)
def test_normalized_image_name(image: str, normalized: str) -> None:
    assert normalized_image_name(image) == normalized


def test_it_is_a_default_score_plugin_with_weight_one() -> None:
    fwk = framework_for(default_plugins=True)
    assert "ImageLocality" in [p.name for p in fwk.score]
    assert fwk.score_weights["ImageLocality"] == 1


# -- the image index: kept incrementally on node add / update / delete ---------------------------


def test_index_follows_node_updates_and_deletes() -> None:
    t = NodeTable()
    t.upsert_node(image_node("a", (["img:1"], 100)))
    t.upsert_node(image_node("b", (["img:1", "img:one"], 100), (["big:1"], 900)))
    assert (t.images.num_nodes("img:1"), t.images.num_nodes("img:one"), t.images.num_nodes("big:1")) == (2, 1, 1)
    # b drops big:1: the image is forgotten with its last node.
    t.upsert_node(image_node("b", (["img:1"], 100)))
    assert t.images.size("big:1") is None and t.images.num_nodes("big:1") == 0
    assert t.images.rows("img:1").tolist() == sorted([t.index["a"], t.index["b"]])
    t.remove_node("a")
    assert t.images.rows("img:1").tolist() == [t.index["b"]]
    t.remove_node("b")
    assert len(t.images) == 0


def test_size_is_the_first_reported_one_as_in_upstreams_cache() -> None:
    t = NodeTable()
    t.upsert_node(image_node("a", (["img:1"], 100)))
    t.upsert_node(image_node("b", (["img:1"], 300)))
    assert t.images.size("img:1") == 100 * MB
    t.remove_node("a")  # b still holds it: the recorded size stays
    assert t.images.size("img:1") == 100 * MB


def test_a_heartbeat_with_the_same_images_changes_nothing() -> None:
    t = NodeTable()
    raw = image_node("a", (["img:1"], 100))
    t.upsert_node(raw)
    cached = t.images.rows("img:1")
    t.upsert_node({**raw, "status": {**raw["status"], "conditions": [{"type": "Ready", "status": "True"}]}})
    assert t.images.rows("img:1") is cached


def test_the_spread_uses_the_current_node_count() -> None:
    # 3 nodes, the 900 MB image on 2 of them: 900M * 2/3 = 600M → 100 * (600M - 23M) / (1000M - 23M) = 59.
    t = table_of(image_node("a", (["big:1"], 900)), image_node("b", (["big:1"], 900)), image_node("c"))
    plugin = new_plugin(ImageLocality, table=t)
    p = spec_pod(["big:1"])
    assert plugin.score_batch(CycleState(), p, t, t.alive_rows()).tolist() == [59, 59, 0]
    t.upsert_node(image_node("c", (["big:1"], 900)))  # everywhere now: 100 * (900M - 23M) / 977M = 89
    assert plugin.score_batch(CycleState(), p, t, t.alive_rows()).tolist() == [89, 89, 89]
    rows = np.array([t.index["b"]], dtype=np.intp)
    assert plugin.score_batch(CycleState(), p, t, rows).tolist() == [89]


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ("x", "node a: status.images: expected an array, got string"),
        (["img"], "node a: status.images[0]: expected an object, got string"),
        (
            [{"names": "img", "sizeBytes": 1}],
            "node a: status.images[0].names: expected an array of strings, got string",
        ),
        (
            [{"names": ["img"], "sizeBytes": "1Gi"}],
            "node a: status.images[0].sizeBytes: expected an integer, got string '1Gi'",
        ),
    ],
)
def test_malformed_images_are_named(images: Any, message: str) -> None:
    raw = node("a")
    raw["status"]["images"] = images
    t = NodeTable()
    with pytest.raises(NodeSpecError) as e:
        t.upsert_node(raw)
    assert str(e.value) == message
    assert len(t) == 0  # nothing half-added


def test_nodes_reporting_images_later_are_scored() -> None:
    # With no image on any node the plugin answers zeros without listing the pod's images; a node
    # that reports images later must be scored from then on.
    t = table_of(image_node("node1"), image_node("node2"))
    plugin = new_plugin(ImageLocality, table=t)
    p = spec_pod(["gcr.io/2000"])
    assert plugin.score_batch(CycleState(), p, t, t.alive_rows()).tolist() == [0, 0]
    t.upsert_node(image_node("node2", (["gcr.io/2000:latest"], 2000)))
    assert plugin.score_batch(CycleState(), p, t, t.alive_rows()).tolist() == [0, 100]
