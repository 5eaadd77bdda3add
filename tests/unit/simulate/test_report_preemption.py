"""The HTML report's preemption section, from real simulator runs (DefaultPreemption in the default profile)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from kubesched.config.load import load_config
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.simulate.report.html import render_html
from kubesched.simulate.report.json_doc import result_to_json


def simulate(nodes: int, pods: int, seed: int) -> dict[str, Any]:
    registry = builtin_registry()
    sim = Simulation(load_config(None, registry), registry, generate_cluster(nodes, pods, seed), seed=seed)
    return result_to_json(asyncio.run(sim.run()))


def test_an_overcommitted_cluster_lists_each_preemption_deterministically() -> None:
    data = simulate(20, 600, seed=7)
    preemptions = data["preemptions"]
    assert preemptions, "an overcommitted cluster with priorities preempts"
    html = render_html(data)
    section = html[html.index('<section id="preemptions">'):]
    section = section[: section.index("</section>")]
    rows = re.findall(r"<tr><td class=\"n\"", section)
    assert len(rows) == min(len(preemptions), 300)
    victims = sum(len(p["victims"]) for p in preemptions)
    assert f"{len(preemptions):,} pods preempted {victims:,} lower-priority pods" in section
    first = preemptions[0]
    assert first["preemptor"] in section and first["node"] in section and first["victims"][0] in section
    assert simulate(20, 600, seed=7)["preemptions"] == preemptions  # same seed, same preemptions


def test_no_section_when_nothing_was_preempted() -> None:
    data = simulate(20, 40, seed=1)
    assert data["preemptions"] == []
    assert 'id="preemptions"' not in render_html(data)
