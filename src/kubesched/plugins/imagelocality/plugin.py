"""ImageLocality: prefer nodes that already hold the pod's container images.

Port of pkg/scheduler/framework/plugins/imagelocality/image_locality.go (v1.37.1). A node's raw
score is the sum, over the pod's images it holds (init and regular containers, image volumes),
of the image's size scaled by the share of nodes holding it (so a widespread image counts less and
pods do not pile onto the few nodes that pulled it first); it is clamped to
[23 MiB, 1000 MiB × number of images] and mapped to 0–100. No NormalizeScore, as upstream.

The node side is the table's image index (snapshot/images.py, upstream's cache bookkeeping): an
image's size is the one first reported for that name, and its node count is current.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, ScorePlugin, Scores
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

_MB = 1024 * 1024
#: Bounds of the summed image score (upstream minThreshold, maxContainerThreshold): a reasonable
#: size range for compressed images in registries (the 90th percentile of Docker Hub).
MIN_THRESHOLD = 23 * _MB
MAX_CONTAINER_THRESHOLD = 1000 * _MB


def normalized_image_name(name: str) -> str:
    """The CRI name of a pod's image reference: ``:latest`` appended when it has no tag
    (upstream normalizedImageName; ``gcr.io:5000/root`` → ``gcr.io:5000/root:latest``)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: PodInfo) -> tuple[tuple[str, ...], int]:
    """The pod's normalized image names, one per init container, container and image volume
    (repeats kept: upstream sums per container), and how many image sources it has."""
    cached = pod.memo.get("ImageLocality")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    spec = pod.spec
    names: list[str] = []
    count = 0
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            names.append(normalized_image_name(str(c.get("image") or "")))
            count += 1
    for v in spec.get("volumes") or ():
        image = v.get("image")
        if image is None:
            continue
        names.append(normalized_image_name(str(image.get("reference") or "")))
        count += 1
    result = (tuple(names), count)
    pod.memo["ImageLocality"] = result
    return result


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """The image's size times the share of nodes holding it (upstream scaledImageScore: the
    float64 product truncated to int64)."""
    spread = num_nodes / total_nodes
    return int(float(size) * spread)


def calculate_priority(sum_scores: Scores, image_count: int) -> Scores:
    """Upstream calculatePriority, over an array of raw sums."""
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    if max_threshold <= MIN_THRESHOLD:  # no image at all: every node scores 0
        return np.zeros(len(sum_scores), dtype=np.int64)
    # np.minimum/np.maximum: np.clip without its Python-level dispatch.
    clamped = np.minimum(np.maximum(sum_scores, MIN_THRESHOLD), max_threshold)
    result: Scores = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return result


class ImageLocality(ScorePlugin):
    name: ClassVar[str] = "ImageLocality"

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (image_locality.go): the distinct normalized images of its containers and init
        containers."""
        spec = pod.spec
        images = {normalized_image_name(str(c.get("image") or ""))
                  for key in ("containers", "initContainers") for c in spec.get(key) or ()}
        return ((signers.IMAGE_NAMES, sorted(images)),)

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores:
        index = table.images
        total = len(table)
        if not total or not len(index):
            # No node reports any image (e.g. KWOK or simulated nodes): nothing can be held, so
            # the pod's images need not even be listed (the zeros below).
            return np.zeros(len(rows), dtype=np.int64)
        names, count = pod_images(pod)
        held = [(name, size) for name in names if (size := index.size(name)) is not None]
        if not held:
            # No node holds any of the pod's images (e.g. nodes that report no status.images):
            # every raw sum is 0, which calculatePriority maps to 0 whatever the image count.
            return np.zeros(len(rows), dtype=np.int64)
        sums = np.zeros(len(table.alive), dtype=np.int64)
        for name, size in held:
            sums[index.rows(name)] += scaled_image_score(size, index.num_nodes(name), total)
        return calculate_priority(sums[rows], count)
