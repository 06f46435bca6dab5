"""Time the cited-answer renderings against plain markdown-it-py on the same text.

    .venv/bin/python bench/citations_render.py [--repeat N]

A synthetic ~300 KB answer (Markdown paragraphs, lists, a table, code) with 6,000 references
over 400 sources, then the same at 10x (3 MB, 60,000 references, 4,000 sources). Goals: cited
HTML within 1.5x of plain markdown-it-py, and 10x input within 12x time. Not a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_model
from _site import best_of
from markdown_it import MarkdownIt

from chats.agent.providers import bigdata as bigdata_adapter
from citations.render import render_markdown
from citations.render_html import render_html
from citations.resolve import resolve_citations

WORDS = (
    *("revenue", "margin", "guidance", "quarter", "segment", "growth", "outlook", "filing"),
    *("**record**", "_adjusted_", "`EBITDA`", "4.2%", "$41.1B", "[link](https://example.com/a)"),
    *("déjà", "数据", "𝄞", "😀"),
)


def synthetic_answer(target_chars: int, rng: random.Random) -> str:
    blocks: list[str] = []
    size = 0
    while size < target_chars:
        kind = rng.random()
        if kind < 0.75:
            block = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "."
        elif kind < 0.88:
            block = "\n".join(f"- {' '.join(rng.choices(WORDS, k=12))}" for _ in range(5))
        elif kind < 0.96:
            rows = [f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} |" for _ in range(6)]
            block = "| Item | Value |\n|---|--:|\n" + "\n".join(rows)
        else:
            block = "```\n" + "\n".join(rng.choices(WORDS, k=8)) + "\n```"
        blocks.append(block)
        size += len(block) + 2
    return "\n\n".join(blocks)


def synthetic_references(answer: str, count: int, sources: int, rng: random.Random) -> list:
    """Spans ending at sentence ends and after percentages, as the agent's spans do."""
    ends = [i for i in range(len(answer) - 1) if answer[i] in ".%" and answer[i + 1] in " \n"]
    references = []
    for _ in range(count):
        end = rng.choice(ends) + 1
        n = rng.randrange(sources)
        source = {
            "type": "BIGDATA" if n % 2 else "EXTERNAL",
            "id": f"doc-{n}",
            "hd": f'Headline {n} <about> "things"',
            "src_name": f"Outlet {n % 37}",
            "ts": f"2026-{n % 12 + 1:02d}-{n % 28 + 1:02d}T00:00:00Z",
            "url": f"https://news.example/{n}",
            "action": {"name": f"Site {n % 23}", "url": f"https://web.example/{n}?q=1&r=2"},
        }
        references.append(
            {
                "start": max(0, end - rng.randint(20, 200)),
                "end": end,
                "tool_name": "search",
                "audit_id": f"audit-{n % 50}",
                "source": source,
            }
        )
    return references


STAGES = ("plain", "resolve", "markdown", "html", "resolve+html")


def measure(scale: int, repeat: int, *, collector: bool) -> dict[str, float]:
    """Return the best time of each stage, in seconds, for `scale` times the base input."""
    rng = random.Random(42)
    answer = synthetic_answer(300_000 * scale, rng)
    references = synthetic_references(answer, 6_000 * scale, 400 * scale, rng)
    plain = MarkdownIt("commonmark", {"html": False}).enable("table")

    def resolve():
        # The adapter's reading is part of the stage, as it was when the resolver read dicts.
        citations = [bigdata_adapter.citation(r) for r in references]
        return resolve_citations(answer=answer, citations=citations)

    cited = resolve()
    gc.freeze()  # the inputs are long-lived: keep the collector from re-walking them every run
    try:
        runs = {
            "plain": lambda: plain.render(answer),
            "resolve": resolve,
            "markdown": lambda: render_markdown(cited),
            "html": lambda: render_html(cited, doc_id="bench"),
            "resolve+html": lambda: render_html(resolve(), doc_id="bench"),
        }
        figures = {name: best_of(repeat, runs[name], collector=collector)[0] for name in STAGES}
    finally:
        gc.unfreeze()
    size = f"{len(answer):,} chars, {len(references):,} references, {len(cited.sources):,} sources"
    print(f"x{scale}: {size}, best of {repeat}, collector {'on' if collector else 'paused'}")
    for name in STAGES:
        ratio = figures[name] / figures["plain"]
        print(f"  {name:13} {figures[name] * 1000:9.1f} ms  {ratio:5.2f}x plain markdown-it-py")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure")
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {cpu_model()}")
    scaling: dict[bool, dict[str, float]] = {}
    for collector in (True, False):
        small = measure(1, args.repeat, collector=collector)
        large = measure(10, args.repeat, collector=collector)
        scaling[collector] = {name: large[name] / small[name] for name in STAGES}
        if collector:
            html_ratio = small["html"] / small["plain"]
            end_to_end_ratio = small["resolve+html"] / small["plain"]
    print("10x input costs (collector on / paused):")
    for name in STAGES:
        print(f"  {name:13} {scaling[True][name]:5.1f}x / {scaling[False][name]:5.1f}x time")
    print(
        f"goals: HTML within 1.5x plain: {html_ratio:.2f}x (with resolve {end_to_end_ratio:.2f}x); "
        f"10x input within 12x time: HTML {scaling[True]['html']:.1f}x, "
        f"{scaling[False]['html']:.1f}x with the collector paused"
    )


if __name__ == "__main__":
    main()
