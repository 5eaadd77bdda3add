"""Render an example HTML report and screenshot it with headless Chromium → docs/report-screenshot.png.

    python docs/screenshot_report.py [--out docs/report-screenshot.png] [--html report.html] [--nodes 240 --pods 2400]
    python docs/screenshot_report.py --nodes 40 --pods 1200 --focus preemptions --height 1500 \
        --out docs/report-preemptions.png   # an overcommitted cluster: DefaultPreemption at work

The data document comes from a real simulator run on a generated cluster (the default profile).
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

from kubesched.simulate.report_html import render_html  # noqa: E402


def focus(html: str, section: str) -> str:
    """The page with only the header and one section shown (for a screenshot of that section)."""
    css = f"<style>main>section:not(#{section}),main>footer{{display:none}}</style>"
    return html.replace("</head>", css + "</head>", 1)


def build(n_nodes: int, n_pods: int, seed: int = 7) -> dict[str, Any]:
    """A real simulator run on a generated cluster, as `kubesched simulate --nodes --pods` does."""
    import asyncio

    from kubesched.config.load import load_config
    from kubesched.plugins.builtin import builtin_registry
    from kubesched.simulate.generator import generate_cluster
    from kubesched.simulate.report_json import result_to_json
    from kubesched.simulate.runner import Simulation

    registry = builtin_registry()
    sim = Simulation(load_config(None, registry), registry, generate_cluster(n_nodes, n_pods, seed), seed=seed)
    return result_to_json(asyncio.run(sim.run()))


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
    args = ap.parse_args()
    data = build(args.nodes, args.pods)
    t0 = time.perf_counter()
    html = render_html(data)
    if args.focus:
        html = focus(html, args.focus)
    print(f"rendered {len(html) / 1024:.0f} KiB in {time.perf_counter() - t0:.3f}s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(html, encoding="utf-8")
        if args.html:
            args.html.write_text(html, encoding="utf-8")
        screenshot(path, args.out, height=args.height)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
