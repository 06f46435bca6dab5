"""Time the Compare page on two versions of a ~300 KB answer with 6,000 references each.

    .venv/bin/python bench/compare.py [--repeat N]

The first version is `citations_render.py`'s synthetic answer (Markdown paragraphs, lists,
tables, code) with 6,000 references over 400 sources. The second changes one figure in twenty,
replaces one paragraph in ten, and moves one reference in twenty to a source of its own. Both
are stored as a run stores them (SQLite in a temporary file) and the page is fetched with
Django's test client: reading both cited answers back, comparing them, rendering the page.
Baseline, in the same run: plain markdown-it-py rendering the same answer once. Goal: the page
in at most 1 s. Not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from _site import best_of, setup_django
from citations_render import synthetic_answer, synthetic_references

GOAL_SECONDS = 1.0
FIGURE = re.compile(r"4\.2%|\$41\.1B")


def second_version(answer: str, references: list[dict], rng: random.Random):
    """Another version of the answer: figures changed, paragraphs replaced, sources moved."""
    answer = FIGURE.sub(
        lambda m: m[0] if rng.random() > 0.05 else {"4.2%": "4.7%", "$41.1B": "$43.9B"}[m[0]],
        answer,
    )  # the same length, so every reference's span still fits
    paragraphs = answer.split("\n\n")
    for index in range(0, len(paragraphs), 10):
        words = paragraphs[index].split(" ")
        rng.shuffle(words)
        paragraphs[index] = " ".join(words)
    answer = "\n\n".join(paragraphs)
    moved = []
    for reference in references:
        if rng.random() < 0.05:
            source = {**reference["source"], "id": f"new-{rng.randrange(100)}"}
            reference = {**reference, "source": source}
        moved.append(reference)
    return answer, moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure")
    args = parser.parse_args()
    database = Path(tempfile.mkdtemp(prefix="bench-compare-")) / "db.sqlite3"
    os.environ.setdefault("SECRET_KEY", "bench-compare-not-secret")
    setup_django(DATABASE_URL=f"sqlite:///{database}", ALLOWED_HOSTS="testserver")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse
    from markdown_it import MarkdownIt

    from chats.agent.providers import bigdata as bigdata_adapter
    from chats.answer.compare import compare_turns
    from chats.models import Chat, Turn
    from citations.compare import compare_answers
    from citations.selectors import answer_versions_to_compare
    from citations.services import citations_resolve, citations_store_for_turns

    call_command("migrate", verbosity=0)
    rng = random.Random(42)
    answer = synthetic_answer(300_000, rng)
    references = synthetic_references(answer, 6_000, 400, rng)
    versions = [(answer, references), second_version(answer, references, rng)]
    user = get_user_model().objects.create_user("bench")
    chat = Chat.objects.create(owner=user, title="Bench")
    turns = []
    for text, refs in versions:
        turn = Turn.objects.create(chat=chat, question="Q", status="complete", answer_text=text)
        cited = citations_resolve(
            answer=text, citations=[bigdata_adapter.citation(r) for r in refs], tool_calls=()
        )
        citations_store_for_turns([(turn.pk, cited)], replace_stored=False)
        turns.append(turn)
    client = Client()
    client.force_login(user)
    url = reverse("turn_compare", args=[chat.pk, turns[1].pk])
    plain = MarkdownIt("commonmark", {"html": False}).enable("table")

    response = client.get(url)
    assert response.status_code == 200, response.status_code
    if os.environ.get("BENCH_PROFILE"):  # where the page's time goes
        import cProfile
        import pstats

        cProfile.runctx("client.get(url)", globals(), locals(), "/tmp/bench-compare.prof")
        pstats.Stats("/tmp/bench-compare.prof").sort_stats("tottime").print_stats(25)
    comparison = compare_turns(before=turns[0], after=turns[1])
    cited = answer_versions_to_compare(turns)
    # Best wall and CPU times: on a machine others load, the CPU time says what the page costs.
    page, page_cpu = best_of(args.repeat, lambda: client.get(url))
    read, _ = best_of(args.repeat, lambda: answer_versions_to_compare(turns))
    compare, _ = best_of(
        args.repeat, lambda: compare_answers(cited[turns[0].pk], cited[turns[1].pk])
    )
    baseline, baseline_cpu = best_of(args.repeat, lambda: plain.render(answer))
    print("## Comparing versions (`bench/compare.py`)\n")
    print(machine())
    print(
        f"\nTwo versions of {len(answer):,} and {len(versions[1][0]):,} characters,"
        f" {len(references):,} references each; best of {args.repeat}."
    )
    print(f"Summary line: {comparison.summary}; {len(response.content):,} bytes of page.\n")
    print("| stage | ms | x plain markdown-it-py on one version |")
    print("|---|---:|---:|")
    print(f"| plain markdown-it-py (baseline) | {baseline * 1000:.1f} | 1.00 |")
    print(f"| read both cited answers back | {read * 1000:.1f} | {read / baseline:.2f} |")
    print(f"| compare them | {compare * 1000:.1f} | {compare / baseline:.2f} |")
    print(f"| the whole Compare page | {page * 1000:.1f} | {page / baseline:.2f} |")
    print(
        f"| the whole Compare page, CPU time | {page_cpu * 1000:.1f} |"
        f" {page_cpu / baseline_cpu:.2f} (of the baseline's CPU time) |"
    )
    verdict = "met" if page <= GOAL_SECONDS else "NOT met"
    print(
        f"\ngoal: the page in at most {GOAL_SECONDS:g} s: {page:.2f} s wall"
        f" ({page_cpu:.2f} s CPU), {verdict}"
    )


if __name__ == "__main__":
    main()
