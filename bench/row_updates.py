"""Writing a batch of finished turns' rows: one UPDATE per row against `chats.row_updates`.

    .venv/bin/python bench/row_updates.py [--postgres] [--batches 12]

40 finished turns (their answer, HTML, charts, notices, times: `services.FINISHED_FIELDS`) and
their 40 chats (`updated_at`, `upstream_chat_id`), written in one transaction a batch, as
`chats.services.turn_finish_many` writes them: by `save(update_fields=...)` and one
`update()` per chat, or by two `update_rows` statements. The two ways alternate, batch after
batch, on a fresh SQLite file, or with `--postgres` on a fresh PostgreSQL database on
127.0.0.1:5432 (user postgres, dropped at the end). Figures: medians per turn of wall time and
of this process's CPU time. Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from _site import invocation, table
from stages import migrated_site

TURNS = 40  # a batch of finishes (chats.loop.batches)


def psql(sql: str) -> None:
    command = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql]
    subprocess.run(command, check=True, capture_output=True)


def run(batches: int) -> dict[str, list[tuple[float, float]]]:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from chats.models import Chat, Turn
    from chats.row_updates import update_rows
    from chats.services import FINISHED_FIELDS

    users = get_user_model()
    users.objects.bulk_create(users(username=f"u{i}", password="!") for i in range(TURNS))
    Chat.objects.bulk_create(Chat(owner=user) for user in users.objects.all())
    Turn.objects.bulk_create(Turn(chat=chat, question="q") for chat in Chat.objects.all())
    turns = list(Turn.objects.select_related("chat"))

    def finished(batch: int) -> None:
        now = timezone.now()
        for turn in turns:
            turn.status, turn.finished_at, turn.lease_expires_at = "complete", now, None
            turn.answer_text = f"Answer {batch} to turn {turn.pk}. " * 50
            turn.answer_html = f"<p>Answer {batch}.</p>" * 50
            turn.charts, turn.notices = [{"batch": batch}], [f"notice {batch}"]
            turn.chat.updated_at, turn.chat.upstream_chat_id = now, f"up-{turn.pk}-{batch}"

    def one_by_one() -> None:
        for turn in turns:
            turn.save(update_fields=FINISHED_FIELDS)
            chat = turn.chat
            Chat.objects.filter(pk=chat.pk).update(
                updated_at=chat.updated_at, upstream_chat_id=chat.upstream_chat_id
            )

    def together() -> None:
        update_rows(turns, FINISHED_FIELDS)
        update_rows([turn.chat for turn in turns], ["updated_at", "upstream_chat_id"])

    figures: dict[str, list[tuple[float, float]]] = {"one UPDATE a row": [], "update_rows": []}
    for batch in range(batches):
        for name, write in zip(figures, (one_by_one, together), strict=True):
            finished(batch)
            wall, cpu = time.perf_counter(), time.process_time()
            with transaction.atomic():
                write()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            figures[name].append((wall / TURNS, cpu / TURNS))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args()
    print(f"## A batch's rows (`{invocation()}`)\n")
    print(machine())
    name = f"bench_rows_{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="researchsite-rows-") as directory:
        if args.postgres:
            psql(f"CREATE DATABASE {name}")
            url = f"postgres://postgres@127.0.0.1:5432/{name}"
        else:
            url = f"sqlite:///{directory}/rows.sqlite3"
        try:
            migrated_site(url)
            figures = run(args.batches)
        finally:
            if args.postgres:
                from django.db import connections

                connections.close_all()
                psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    rows = [
        [
            way,
            f"{statistics.median(w for w, _ in values) * 1e6:,.0f}",
            f"{statistics.median(c for _, c in values) * 1e6:,.0f}",
        ]
        for way, values in figures.items()
    ]
    database = "PostgreSQL" if args.postgres else "SQLite"
    print(f"\n{TURNS} turns and their chats a batch, {args.batches} batches each, {database}:\n")
    print(table(["way", "wall µs a turn", "CPU µs a turn"], rows))


if __name__ == "__main__":
    main()
