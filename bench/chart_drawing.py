"""Time drawing charts in Chromium, as the site draws them, against the 1 s goal.

    .venv/bin/python bench/chart_drawing.py [--repeat N]

Each spec near the sanitiser's bounds (`tests/chats/answer/chart_attacks.py`, DRAWABLE) is
sanitised as a CHART's spec is on arrival, then drawn alone in headless Chromium with the
vendored Vega-Lite and the options of `chats/static/chats/charts.js` (SVG, expressions
interpreted), timed by the page's own clock; best of N. Baseline: a three-bar chart drawn in the
same run. Goal: every spec under 1 s. The attacks themselves are refused by the sanitiser
(shown as tables), so they are not drawn here. Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _site import setup_django  # noqa: E402

setup_django()

from _machine import machine  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from chats.answer.charts import sanitize_spec  # noqa: E402
from tests.chats.answer.chart_attacks import ATTACKS, DRAWABLE  # noqa: E402

GOAL_MS = 1000
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
VENDOR = ROOT / "chats" / "static" / "chats" / "vendor"
BASELINE = {
    "data": {"values": [{"q": "Q1", "v": 1}, {"q": "Q2", "v": 3}, {"q": "Q3", "v": 2}]},
    "mark": "bar",
    "encoding": {
        "x": {"field": "q", "type": "nominal"},
        "y": {"field": "v", "type": "quantitative"},
    },
}
DRAW = """async (spec) => {
  const box = document.createElement("div");
  document.body.append(box);
  const started = performance.now();
  await window.vegaEmbed(box, spec, {
    mode: "vega-lite", renderer: "svg", actions: false, ast: true,
    expr: window.vegaInterpreter.expressionInterpreter,
  });
  const took = performance.now() - started;
  box.remove();
  return took;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for spec in ATTACKS.values():  # what the page would be given: nothing, a table instead
        try:
            sanitize_spec(spec)
        except ValueError:
            continue
        raise SystemExit("an attack passed the sanitiser")
    specs = {"baseline: three bars": sanitize_spec(BASELINE)}
    specs.update({name: sanitize_spec(spec) for name, spec in DRAWABLE.items()})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page()
        page.set_content("<!doctype html><html><body></body></html>")
        for script in ("vega", "vega-lite", "vega-embed", "vega-interpreter"):
            page.add_script_tag(path=str(VENDOR / f"{script}.min.js"))
        times = {
            name: min(page.evaluate(DRAW, spec) for _ in range(args.repeat))
            for name, spec in specs.items()
        }
        browser.close()
    baseline = times["baseline: three bars"]
    print(f"machine: {machine()}")
    print(f"Chromium {CHROMIUM}; best of {args.repeat}; {len(ATTACKS)} attacks refused")
    for name, took in times.items():
        print(f"{took:8.1f} ms  {took / baseline:6.1f}x baseline  {name}")
    worst = max(times.values())
    verdict = "met" if worst < GOAL_MS else "NOT met"
    print(f"slowest {worst:.0f} ms: goal of under {GOAL_MS} ms per chart {verdict}")


if __name__ == "__main__":
    main()
