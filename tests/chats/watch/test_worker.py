"""The task worker: a due watch run once by django-tasks' worker, and by the server's own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chats.models import Turn, Watch, WatchRun
from demo_agent.scripted import Reply, cited_answer_stream
from tests.chats.watch.answers import SECOND
from tests.waiting import wait_until_sync

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_task_worker_runs_a_due_watch_once_and_queues_the_next(watched, upstream):
    Watch.objects.filter(pk=watched.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))
    DBTaskResult.objects.update(run_after=timezone.now() - timedelta(minutes=1))
    # The same watch queued twice (a resume, a retry): the claim runs it once.
    from chats.watch.tasks import run_due_watch

    run_due_watch.enqueue(watched.pk)
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("db_worker", "--batch", "--interval", "0")

    assert WatchRun.objects.get().state == "changed"
    assert len(upstream.requests) == 1
    watch = Watch.objects.get()
    assert watch.next_run_at > timezone.now() and watch.running_until is None
    assert DBTaskResult.objects.filter(status="READY", run_after=watch.next_run_at).exists()


def test_the_server_runs_a_due_watch_on_its_own_worker(watched, upstream, settings):
    """`make run`'s one process: the task worker in the server's thread takes the due task and
    the run goes on the server's event loop."""
    from channels.layers import channel_layers

    from researchsite.asgi import application
    from tests.servers import serve_asgi

    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    due = timezone.now() - timedelta(minutes=1)
    Watch.objects.filter(pk=watched.pk).update(next_run_at=due)
    DBTaskResult.objects.update(run_after=due)
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    channel_layers.backends.clear()
    with serve_asgi(application, lifespan="on"):
        wait_until_sync(lambda: WatchRun.objects.exclude(state="running").exists())
    assert WatchRun.objects.get().state == "changed"
    assert Turn.objects.filter(chat=watched.chat).count() == 2
