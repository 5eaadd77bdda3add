"""Render an example HTML report and screenshot it with headless Chromium → docs/report-screenshot.png.

    python docs/screenshot_report.py [--out docs/report-screenshot.png] [--html report.html] [--nodes 240 --pods 2400]
    python docs/screenshot_report.py --nodes 40 --pods 1200 --focus preemptions --height 1500 \
        --out docs/report-preemptions.png   # an overcommitted cluster: DefaultPreemption at work
    python docs/screenshot_report.py --page capacity --nodes 120 --pods 900 --height 2600 \
        --out docs/report-capacity.png      # kubesched capacity --report: two workloads, two node templates
    python docs/screenshot_report.py --page drain --nodes 60 --pods 420 --focus drain --height 1700 \
        --out docs/report-drain.png         # simulate --drain-selector with PodDisruptionBudgets
    python docs/screenshot_report.py --page compare --nodes 60 --pods 240 --height 2000 \
        --out docs/report-compare.png       # kubesched compare: spreading vs bin-packing

The pages come from real runs on a generated cluster: the simulator (default profile), or the
``kubesched capacity`` / ``simulate --drain`` / ``compare`` commands as a user runs them.
Needs /usr/bin/chromium (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kubesched.simulate.report.html import render_html  # noqa: E402


def focus(html: str, section: str) -> str:
    """The page with only the header and one section shown (for a screenshot of that section)."""
    css = f"<style>main>section:not(#{section}),main>footer{{display:none}}</style>"
    return html.replace("</head>", css + "</head>", 1)


def build(n_nodes: int, n_pods: int, seed: int = 7) -> dict[str, Any]:
    """A real simulator run on a generated cluster, as `kubesched simulate --nodes --pods` does."""
    import asyncio

    from kubesched.config.load import load_config
    from kubesched.plugins.builtin import builtin_registry
    from kubesched.simulate.inputs.generator import generate_cluster
    from kubesched.simulate.report.json_doc import result_to_json
    from kubesched.simulate.engine.runner import Simulation

    registry = builtin_registry()
    sim = Simulation(load_config(None, registry), registry, generate_cluster(n_nodes, n_pods, seed), seed=seed)
    return result_to_json(asyncio.run(sim.run()))


def _cli(*args: str) -> None:
    """Run a kubesched command as a user does (its --report writes the page)."""
    from kubesched.cli import main

    try:
        main([*args], standalone_mode=False)
    except SystemExit as e:  # click's exit on success
        if e.code:
            raise


def capacity_page(n_nodes: int, n_pods: int, tmp: Path, seed: int = 7) -> str:
    """``kubesched capacity --report``: how many more of two workloads fit, and the fewest nodes of
    two templates (with costs) to add for both at their replica counts."""
    import yaml

    def deployment(name: str, replicas: int, cpu: str, memory: str, **spec: object) -> dict[str, object]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "shop"},
                "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}}, "spec": {
                    "containers": [{"name": "app", "image": "app",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}}}

    workload = tmp / "workload.yaml"
    workload.write_text(yaml.safe_dump_all([
        deployment("web", n_nodes * 16, "500m", "1Gi"),
        deployment("search", n_nodes * 3, "2", "8Gi", nodeSelector={"kubernetes.io/arch": "amd64"}),
    ]))
    templates = tmp / "nodes.yaml"
    templates.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"m6i-{size}", "annotations": {
            "kubesched.io/cost": str(cost)}, "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}},
         "status": {"allocatable": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}}}
        for size, cpu, cost in (("xlarge", 4, 0.192), ("4xlarge", 16, 0.768))
    ]))
    # The cluster as it runs: a generated one once scheduled, without the pods that did not fit.
    cluster = tmp / "cluster.yaml"
    _cli("simulate", "-q", "--nodes", str(n_nodes), "--pods", str(n_pods), "--seed", str(seed),
         "--out-cluster", str(cluster))
    doc = yaml.safe_load(cluster.read_text())
    doc["items"] = [i for i in doc["items"] if i.get("kind") != "Pod" or i["spec"].get("nodeName")]
    cluster.write_text(yaml.safe_dump(doc, sort_keys=False))
    page = tmp / "capacity.html"
    _cli("capacity", "-q", "--cluster", str(cluster), "--seed", str(seed),
         "--workload", str(workload), "--node-template", str(templates), "--report", str(page))
    return page.read_text(encoding="utf-8")


def drain_page(n_nodes: int, n_pods: int, tmp: Path, seed: int = 7) -> str:
    """``kubesched simulate --drain-selector --report`` on a generated cluster once scheduled, with
    PodDisruptionBudgets on some of its apps: one at 0 allowed, others allowing one disruption."""
    import yaml

    scheduled = tmp / "cluster.yaml"
    _cli("simulate", "-q", "--nodes", str(n_nodes), "--pods", str(n_pods), "--seed", str(seed),
         "--out-cluster", str(scheduled))
    doc = yaml.safe_load(scheduled.read_text())
    apps: dict[tuple[str, str], int] = {}
    for item in doc["items"]:
        if item.get("kind") == "Pod" and item["spec"].get("nodeName"):
            labels = item["metadata"].get("labels") or {}
            if "app.kubernetes.io/name" in labels:
                key = (item["metadata"]["namespace"], labels["app.kubernetes.io/name"])
                apps[key] = apps.get(key, 0) + 1
    big = sorted(apps.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    for i, ((namespace, name), count) in enumerate(big):
        rule = {"maxUnavailable": 0} if i == 0 else {"minAvailable": count - 1} if i % 2 else {"maxUnavailable": "10%"}
        doc["items"].append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": name, "namespace": namespace},
                             "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": name}}, **rule}})
    scheduled.write_text(yaml.safe_dump(doc, sort_keys=False))
    page = tmp / "drain.html"
    _cli("simulate", "-q", "--cluster", str(scheduled), "--drain-selector",
         "topology.kubernetes.io/zone=us-east-1a", "--report", str(page))
    return page.read_text(encoding="utf-8")


def compare_page(n_nodes: int, n_pods: int, tmp: Path, seed: int = 4) -> str:
    """``kubesched compare --report``: the default profile against a bin-packing one."""
    import yaml

    configs = []
    for name, scoring in (("spread", "LeastAllocated"), ("binpack", "MostAllocated")):
        path = tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{"name": "NodeResourcesFit", "args": {
                "scoringStrategy": {"type": scoring, "resources": [{"name": "cpu", "weight": 1},
                                                                   {"name": "memory", "weight": 1}]}}}]}],
        }))
        configs += ["--config", str(path)]
    page = tmp / "compare.html"
    _cli("compare", "-q", *configs, "--nodes", str(n_nodes), "--pods", str(n_pods), "--seed", str(seed),
         "--report", str(page))
    return page.read_text(encoding="utf-8")


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 2400) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png}",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "report-screenshot.png")
    ap.add_argument("--html", type=Path, help="also keep the HTML here")
    ap.add_argument("--nodes", type=int, default=240)
    ap.add_argument("--pods", type=int, default=2400)
    ap.add_argument("--height", type=int, default=3300, help="window height (the whole example page)")
    ap.add_argument("--focus", metavar="SECTION", help="show only this section (its id, e.g. preemptions)")
    ap.add_argument("--page", choices=("simulate", "capacity", "drain", "compare"), default="simulate",
                    help="which command's page (default: the simulation report)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if args.page == "simulate":
            html = render_html(build(args.nodes, args.pods))
        else:
            pages = {"capacity": capacity_page, "drain": drain_page, "compare": compare_page}
            html = pages[args.page](args.nodes, args.pods, Path(tmp))
        if args.focus:
            html = focus(html, args.focus)
        print(f"{args.page} page: {len(html) / 1024:.0f} KiB in {time.perf_counter() - t0:.1f}s (command included)")
        path = Path(tmp) / "report.html"
        path.write_text(html, encoding="utf-8")
        if args.html:
            args.html.write_text(html, encoding="utf-8")
        screenshot(path, args.out, height=args.height)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
