"""A due watch runs once, however many task workers and `run_watches --all` try at once: two
`db_worker` processes and the command, against one PostgreSQL database."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import time as time_of_day
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection, connections
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chats.models import Chat, Turn, Watch, WatchRun
from chats.watch.tasks import watch_claim, watch_create
from demo_agent.scripted import Reply, ScriptedAgent, Sleep, cited_answer_stream
from demo_agent.wire import sse_event
from tests.chats.watch.answers import FIRST, SECOND, answered_turn
from tests.servers import serve_asgi
from tests.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.scaleout,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.environ.get("TEST_DATABASE_URL", "").startswith("postgres"),
        reason="needs TEST_DATABASE_URL=postgres://… (make test-services runs it)",
    ),
]


def due_watch(django_user_model) -> Watch:
    user = django_user_model.objects.create_user("analyst", password="pw-watch-workers-1")
    chat = Chat.objects.create(owner=user)
    watch = watch_create(
        owner=user, turn=answered_turn(chat, FIRST), every="day", time_of_day=time_of_day(9)
    )
    past = timezone.now() - timedelta(minutes=1)
    Watch.objects.filter(pk=watch.pk).update(next_run_at=past)
    DBTaskResult.objects.update(run_after=past)
    return watch


def test_a_due_watch_runs_once_with_two_workers_and_the_command(django_user_model):
    watch = due_watch(django_user_model)
    due_task = DBTaskResult.objects.get()
    released = threading.Event()

    def held_answer():
        """The new version's answer, held back until every contender has tried its claim."""
        while not released.is_set():
            yield Sleep(0.05)
        for message in cited_answer_stream(SECOND):
            yield sse_event("chat-up-1", message)

    upstream = ScriptedAgent(lambda request: Reply(body=held_answer()))
    db = connection.settings_dict
    with serve_asgi(upstream) as agent:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "researchsite.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "SECRET_KEY": django_settings.SECRET_KEY,
            "RESEARCH_AGENT_URL": f"{agent}/v1/research-agent",
            "BIGDATA_API_KEY": "watch-workers-test-key",
            "DEMO_AGENT_ENABLED": "false",
            "AGENT_MAX_RETRIES": "0",
        }

        def manage(*args: str) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip

        workers = [manage("db_worker", "--interval", "0.1", "--no-startup-delay") for _ in range(2)]
        command = manage("run_watches", "--all")
        try:
            wait_until_sync(lambda: upstream.requests, timeout=60, what="a run to ask the agent")
            # Whoever runs it holds the claim; the others try theirs meanwhile: the command
            # exits ("No watch to run."), the worker given the due task finds it claimed.
            due_task.refresh_from_db()
            wait_until_sync(
                lambda: (
                    command.poll() is not None
                    or DBTaskResult.objects.get(pk=due_task.pk).status == "SUCCESSFUL"
                ),
                timeout=60,
                what="the other contenders to try",
            )
            released.set()
            wait_until_sync(
                lambda: WatchRun.objects.exclude(state="running").exists(),
                timeout=60,
                what="the run's end",
            )
            command_output, _ = command.communicate(timeout=60)
            wait_until_sync(
                lambda: DBTaskResult.objects.get(pk=due_task.pk).status == "SUCCESSFUL",
                timeout=60,
                what="the due task to end",
            )
        finally:
            released.set()
            for process in [*workers, command]:
                if process.poll() is None:
                    process.terminate()
            for process in [*workers, command]:
                process.communicate(timeout=30)

    assert command.returncode == 0, command_output
    assert len(upstream.requests) == 1
    run = WatchRun.objects.get()
    assert run.state == "changed"
    assert Turn.objects.filter(chat_id=watch.chat_id).count() == 2
    assert Watch.objects.get().next_run_at > timezone.now()


def test_simultaneous_claims_on_postgresql_let_one_through(django_user_model):
    watch = due_watch(django_user_model)
    barrier = threading.Barrier(8)
    won: list[bool] = []

    def claim() -> None:
        try:
            barrier.wait()
            won.append(watch_claim(watch_id=watch.pk, due_only=True) is not None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 7 + [True]
