"""Time searching past chats on 10,000 chats of 10 turns each, against "results within 100 ms".

    .venv/bin/python bench/search.py [--chats 10000] [--turns 10] [--repeat 30]
    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/x .venv/bin/python bench/search.py

SQLite always (a fresh file in /tmp); PostgreSQL too when TEST_DATABASE_URL or DATABASE_URL
names one (a fresh database `searchbench_<pid>` is made on that server and dropped after). One
analyst owns all the chats (the worst case for the per-user filter); a second user owns 5% more
that must never match. Answers are ~120 words drawn with a Zipf law from a 6,000-word lexicon,
so there are words in almost every chat, in about a tenth, and in a handful.

Each query is timed end to end through `chat_search_for_user` (rank, the top 20, their snippets,
their chats). The machine is shared and noisy, so each figure is also given as a ratio to a
baseline on the same data in the same process: counting the analyst's documents that contain
the word with `icontains` (a full scan). The last row times one catch-up pass of the index
(`chats_due_for_search` over its 7-day window, every chat in it, none due): what a server's
start-up asks the database; the passes every 5 minutes look at the few minutes since the last
one, so they cost less on a real site. Not a test.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
sys.path.insert(0, str(ROOT / "bench"))

from _site import machine, percentile, setup_django, table  # noqa: E402

GOAL_MS = 100.0
SYLLABLES = [
    "ka",
    "lo",
    "ve",
    "ri",
    "tan",
    "mor",
    "el",
    "sun",
    "dra",
    "pex",
    "ul",
    "qi",
    "nor",
    "bas",
    "fen",
    "gu",
    "tor",
    "wyn",
]


def lexicon(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))))
    return sorted(words, key=lambda w: (len(w), w))


def run_backend(args: argparse.Namespace) -> None:
    """Fill a fresh database, build the index, time the queries (in this process)."""
    setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from chats.library.search import (
        CATCH_UP_WINDOW,
        chat_search_for_user,
        chat_search_index_rebuild,
        chats_due_for_search,
    )
    from chats.models import Chat, ChatSearchDocument, Turn
    from citations.models import Reference, Source

    call_command("migrate", verbosity=0)
    rng = random.Random(15)
    words = lexicon(6000, rng)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    users = get_user_model().objects
    analyst = users.create_user("analyst", password="bench-password-123")
    other = users.create_user("other", password="bench-password-123")

    started = time.perf_counter()
    sources = Source.objects.bulk_create(
        Source(
            key=f"id:{i}",
            type="BIGDATA",
            name=f"Outlet {words[-1 - i % 500]}",
            headline=" ".join(rng.choices(words, cum_weights=weights, k=8)),
            label=f"Outlet {i}",
            data={},
        )
        for i in range(2000)
    )
    owners = [analyst] * args.chats + [other] * (args.chats // 20)
    for first in range(0, len(owners), 1000):
        chats = Chat.objects.bulk_create(
            Chat(owner=owner, title=" ".join(rng.choices(words, cum_weights=weights, k=5)))
            for owner in owners[first : first + 1000]
        )
        turns = Turn.objects.bulk_create(
            Turn(
                chat=chat,
                question=" ".join(rng.choices(words, cum_weights=weights, k=10)) + "?",
                status="complete",
                answer_text=" ".join(rng.choices(words, cum_weights=weights, k=120)) + ".",
            )
            for chat in chats
            for _ in range(args.turns)
        )
        Reference.objects.bulk_create(
            Reference(turn=turn, position=0, start=0, end=5, source=rng.choice(sources), data={})
            for turn in turns
        )
    filled = time.perf_counter() - started

    started = time.perf_counter()
    indexed = chat_search_index_rebuild()
    index_seconds = time.perf_counter() - started
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # As autovacuum would after a bulk load: statistics, and no dead row versions left
            # by the index build's UPDATE for the GIN index to point the heap scans at.
            cursor.execute("VACUUM ANALYZE")

    # Words by how many of the analyst's chats hold them: common, a tenth, rare.
    bodies = ChatSearchDocument.objects.filter(chat__owner=analyst).values_list("body", flat=True)
    frequency: dict[str, int] = {}
    for body in bodies.iterator():
        for word in set(body.split()):
            frequency[word] = frequency.get(word, 0) + 1
    by_share = sorted((count, word) for word, count in frequency.items() if word.isalpha())

    def word_near(share: float) -> tuple[str, int]:
        target = share * args.chats
        count, word = min(by_share, key=lambda item: abs(item[0] - target))
        return word, count

    common, tenth, rare = word_near(0.9), word_near(0.1), word_near(0.001)
    queries = [
        (f"common word ({common[1]} chats)", common[0]),
        (f"word in a tenth ({tenth[1]} chats)", tenth[0]),
        (f"rare word ({rare[1]} chats)", rare[0]),
        ("two words, common + tenth", f"{common[0]} {tenth[0]}"),
        ("prefix while typing (tenth)", tenth[0][: max(3, len(tenth[0]) - 2)]),
        ("no match", "zzzzqqq"),
    ]

    def timed(function, repeat: int = args.repeat) -> list[float]:
        function()  # warm the caches once
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            function()
            samples.append((time.perf_counter() - started) * 1000)
        return sorted(samples)

    rows = []
    worst_p95 = 0.0
    for label, query in queries:
        hits = len(chat_search_for_user(user=analyst, query=query))
        search = timed(lambda q=query: chat_search_for_user(user=analyst, query=q))
        word = query.split()[0]
        scan = timed(
            lambda w=word: ChatSearchDocument.objects.filter(
                chat__owner=analyst, body__icontains=w
            ).count(),
            repeat=min(args.repeat, 7),  # a full scan: slow, and only its median is used
        )
        p50, p95 = percentile(search, 50), percentile(search, 95)
        worst_p95 = max(worst_p95, p95)
        rows.append(
            [
                label,
                f"`{query}`",
                hits,
                f"{p50:.1f}",
                f"{p95:.1f}",
                f"{percentile(scan, 50):.1f}",
                f"{p50 / percentile(scan, 50):.3f}",
            ]
        )
    # A catch-up pass of the index (chats/library/search.py) with every chat in its window and
    # none due: the chats were all made minutes ago, so this is its worst case for this data.
    since = timezone.now() - CATCH_UP_WINDOW
    assert chats_due_for_search(since=since) == []
    passes = timed(lambda: chats_due_for_search(since=since))
    label = f"catch-up pass ({Chat.objects.count()} chats in its window, none due)"
    p50, p95 = percentile(passes, 50), percentile(passes, 95)
    rows.append([label, "", 0, f"{p50:.1f}", f"{p95:.1f}", "", ""])
    vendor = connection.vendor
    if vendor == "sqlite":
        version = f"SQLite {connection.Database.sqlite_version}"
    else:
        version = f"PostgreSQL {connection.pg_version // 10000}"
    print(f"\n## {version}: {args.chats} chats x {args.turns} turns")
    print(
        f"filled {Turn.objects.count()} turns in {filled:.0f} s;"
        f" indexed {indexed} chats in {index_seconds:.1f} s ({indexed / index_seconds:.0f}/s)\n"
    )
    headers = ["query", "text", "results", "p50 ms", "p95 ms", "scan p50 ms", "p50 / scan"]
    print(table(headers, rows))
    verdict = "met" if worst_p95 <= GOAL_MS else "missed"
    print(f"\nGoal: results within {GOAL_MS:.0f} ms: {verdict} (worst p95 {worst_p95:.1f} ms)")


def postgres_database(url: str) -> tuple[str, str]:
    """Return (a fresh database URL on the server `url` names, its name)."""
    name = f"searchbench_{os.getpid()}"
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}")), name


def admin_sql(url: str, sql: str) -> None:
    import psycopg

    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(sql)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_backend(args)
        return

    print(f"# Search bench\n\n{machine()}")
    passed = [f"--chats={args.chats}", f"--turns={args.turns}", f"--repeat={args.repeat}"]
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *passed]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    with tempfile.TemporaryDirectory(prefix="searchbench-") as folder:
        sqlite_url = f"sqlite:///{folder}/bench.sqlite3"
        subprocess.run(command, env={**env, "DATABASE_URL": sqlite_url}, check=True, cwd=ROOT)
    server = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
    if server.startswith("postgres"):
        url, name = postgres_database(server)
        admin_sql(server, f"CREATE DATABASE {name}")
        try:
            subprocess.run(command, env={**env, "DATABASE_URL": url}, check=True, cwd=ROOT)
        finally:
            admin_sql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
