"""Time the claim check on a ~300 KB answer with 2,000 cited claims.

    .venv/bin/python bench/claims_check.py [--repeat N] [--claims N]

Each claim (~150 characters, figures of every kind) cites one to three of 400 sources whose
passages hold the figures; one claim in ten changes a figure. Baselines on the same texts:
`re.findall(r"\\d+", ...)` over each claim and its passages, as the check reads them, and over
the answer once. Goal: all claims checked well under a second. Not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_model
from _site import best_of

from citations import claims
from citations.claims import check_claim, summarise

COMPANIES = ("NVIDIA", "Microsoft", "Alphabet", "Amazon", "Meta", "Tesla", "Apple", "TSMC")
ORDINALS = ("first", "second", "third", "fourth")
FILLER = (
    "Analysts said demand stayed firm across the segment, and management repeated its outlook "
    "while pointing to supply constraints[^3] that are easing. See https://ir.example/q3-2026."
)


def facts(rng: random.Random) -> dict[str, object]:
    return {
        "company": rng.choice(COMPANIES),
        "revenue": rng.randint(50, 2000) / 10,
        "quarter": rng.randint(1, 4),
        "year": rng.randint(2024, 2027),
        "growth": rng.randint(1, 80),
        "margin": rng.randint(300, 800) / 10,
        "bps": rng.randint(1, 30) * 10,
        "multiple": rng.randint(10, 60) / 10,
        "day": rng.randint(1, 28),
        "units": rng.randint(1, 999),
    }


def passage(f: dict[str, object]) -> str:
    return (
        f"{f['company']} reported revenue of ${f['revenue']:.1f} billion for the "
        f"{ORDINALS[f['quarter'] - 1]} quarter of fiscal {f['year']}, up {f['growth']}% from a "
        f"year earlier. GAAP gross margin was {f['margin']:.1f}%, up {f['bps']} basis points, and "
        f"the shares trade at {f['multiple']:.1f} times sales. The results were published on "
        f"October {f['day']}, {f['year'] - 1}; the company shipped {f['units']:,} thousand units "
        f"of its H100 and GB200 systems. 1. Data center 2. Gaming [1]"
    )


def claim(f: dict[str, object], rng: random.Random, *, wrong: bool) -> str:
    growth = f["growth"] + (7 if wrong else 0)
    return rng.choice(
        (
            f"{f['company']} posted ${f['revenue']:.1f}bn in Q{f['quarter']} FY{f['year'] % 100} "
            f"({growth}% higher), with margins near {round(f['margin'])}%. ",
            f"Gross margin reached {f['margin']:.1f}% (+{f['bps']}bps) as revenue rose {growth} "
            f"percent in the {ORDINALS[f['quarter'] - 1]} quarter, per the filing. ",
            f"The stock trades at {f['multiple']:.1f}x sales after {growth}% growth; results came "
            f"on October {f['day']}, {f['year'] - 1}, with {f['units']}k units shipped. ",
        )
    )


def synthetic(
    count: int, sources: int, rng: random.Random
) -> tuple[str, list[tuple[str, list[str]]], list[bool]]:
    """Return an answer, its (claim, passages) pairs and which claims changed a figure."""
    pool = [facts(rng) for _ in range(sources)]
    passages = [passage(f) for f in pool]
    pieces: list[str] = []
    cited: list[tuple[str, list[str]]] = []
    changed: list[bool] = []
    for _ in range(count):
        chosen = rng.sample(range(sources), rng.randint(1, 3))
        changed.append(rng.random() < 0.1)
        text = claim(pool[chosen[0]], rng, wrong=changed[-1])
        cited.append((text, [passages[n] for n in chosen]))
        pieces.append(text)
        if rng.random() < 0.3:
            pieces.append(FILLER + " ")
    return "".join(pieces), cited, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure")
    parser.add_argument("--claims", type=int, default=2000)
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {cpu_model()}")
    print(f"load average {os.getloadavg()[0]:.1f} (wall times suffer on a shared machine)")
    answer, cited, changed = synthetic(args.claims, 400, random.Random(42))
    passage_chars = sum(len(p) for _, passages in cited for p in passages)
    print(
        f"answer {len(answer):,} chars, {len(cited):,} claims, "
        f"{passage_chars:,} passage chars read (400 distinct passages)"
    )

    def check_all() -> list:
        return [check_claim(text, passages) for text, passages in cited]

    def baseline_per_claim() -> None:
        for text, passages in cited:
            re.findall(r"\d+", text)
            for p in passages:
                re.findall(r"\d+", p)

    def cold() -> None:
        claims._passage_figures.cache_clear()  # passages read afresh, as for a new answer

    checks = check_all()
    runs = {
        "check, cold cache": best_of(args.repeat, check_all, before=cold),
        "check, warm cache": best_of(args.repeat, check_all),
        "baseline per claim": best_of(args.repeat, baseline_per_claim),
        "baseline answer": best_of(args.repeat, lambda: re.findall(r"\d+", answer)),
        "extract answer": best_of(
            args.repeat, lambda: claims.extract_figures(answer + " "), before=cold
        ),
    }
    baseline = runs["baseline per claim"][1]
    for name, (wall, cpu) in runs.items():
        per_claim = cpu / len(cited) * 1e6
        print(
            f"  {name:19} {wall * 1000:8.1f} ms wall {cpu * 1000:8.1f} ms CPU "
            f"{per_claim:7.1f} us CPU per claim {cpu / baseline:6.1f}x baseline per claim"
        )
    statuses = Counter(c.status for c in checks)
    print("  statuses:", dict(sorted(statuses.items())))
    flagged = [c.is_flagged for c in checks]
    caught = sum(f and c for f, c in zip(flagged, changed, strict=True))
    false_flags = sum(f and not c for f, c in zip(flagged, changed, strict=True))
    print(
        f"  flagged {caught} of {sum(changed)} claims with a changed figure "
        f"(the changed value may be another figure of the passages), "
        f"{false_flags} of {changed.count(False)} unchanged"
    )
    print("  summary: ", summarise(checks))
    cold_cpu = runs["check, cold cache"][1]
    print(f"goal: all claims checked under 1 s: {cold_cpu:.3f} s CPU cold")


if __name__ == "__main__":
    main()
