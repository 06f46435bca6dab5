"""Watches: a finished answer re-run on a schedule, each run a new version compared with the
one before; the header's "Changes" count; pause, delete, limits, failures, e-mail."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from django.core import mail
from django.core.management import call_command
from django.test import Client as HttpClient
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chats.models import Chat, Turn, Watch, WatchRun
from chats.watch.schedule import next_run_after
from chats.watch.services import watch_create
from demo_agent.scripted import Reply, cited_answer_stream

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = [("Revenue rose 12% to $4.1 billion.", "Reuters"), ("Demand was strong.", "Bloomberg")]
SECOND = [("Revenue rose 14% to $4.2 billion.", "Reuters"), ("Demand was strong.", "Nikkei")]


def answered_turn(chat: Chat, claims=FIRST) -> Turn:
    """A finished turn as a run stores it, from the scripted stand-in's own stream."""
    from chats.agent.events import event_from_data
    from chats.agent.transcript import Transcript
    from chats.services import turn_finish, turn_start

    started = turn_start(chat=chat, question="How did revenue do?", research_effort="standard")
    transcript = Transcript()
    for message in cited_answer_stream(claims):
        transcript.apply(event_from_data(message))
    return turn_finish(turn_id=started.turn.pk, transcript=transcript, status=Turn.Status.COMPLETE)


@pytest.fixture
def watched(user, chat):
    turn = answered_turn(chat)
    return watch_create(owner=user, turn=turn, every="day", time_of_day=time(9, 0))


@pytest.fixture
def browser(user):
    client = HttpClient()
    client.force_login(user)
    return client


def test_a_watch_is_due_at_its_time_and_queued_on_the_task_queue(watched):
    assert watched.next_run_at > timezone.now()
    assert timezone.localtime(watched.next_run_at).time() == time(9, 0)
    queued = DBTaskResult.objects.get()
    assert queued.task_path == "chats.watch.tasks.run_due_watch"
    assert queued.args_kwargs["args"] == [watched.pk]
    assert queued.run_after == watched.next_run_at


def test_next_run_every_day_and_every_week():
    after = timezone.make_aware(timezone.datetime(2026, 11, 27, 10, 0))  # a Friday
    assert next_run_after(every="day", time_of_day=time(9), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 28, 9, 0))
    )
    assert next_run_after(every="day", time_of_day=time(11), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 27, 11, 0))
    )
    assert next_run_after(every="week", time_of_day=time(9), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 30, 9, 0))
    )
    assert next_run_after(every="week", time_of_day=time(11), weekday=4, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 27, 11, 0))
    )


def test_run_watches_all_makes_a_new_version_and_the_header_counts_the_change(
    watched, upstream, browser
):
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("run_watches", "--all")

    versions = list(Turn.objects.filter(chat=watched.chat).order_by("pk"))
    assert len(versions) == 2
    assert versions[1].parent_id == versions[0].parent_id  # a sibling: a new version
    run = WatchRun.objects.get()
    assert (run.state, run.previous_turn, run.turn) == ("changed", versions[0], versions[1])
    assert run.summary == "2 figures changed, 1 source added, 1 dropped"
    assert run.figures == "12% → 14%, $4.1 billion → $4.2 billion"

    header = browser.get(reverse("chat_list")).content.decode()
    assert '>Changes <span class="changes-count" aria-label="1 unseen">1</span></a>' in header
    changes = browser.get(reverse("watch_changes")).content.decode()
    assert "2 figures changed, 1 source added, 1 dropped" in changes
    assert "12% → 14%, $4.1 billion → $4.2 billion" in changes
    compare = reverse("turn_compare", args=[watched.chat_id, versions[1].pk])
    assert f"{compare}?a={versions[0].pk}&amp;b={versions[1].pk}" in changes
    # Seen: the header no longer counts it.
    assert "changes-count" not in browser.get(reverse("chat_list")).content.decode()


def test_a_second_change_before_the_page_is_seen_counts_once_and_seeing_it_clears_it(
    watched, upstream, browser
):
    """The Changes page tells of each watch's latest change; the one it replaced is not left
    counted in the header for ever."""
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("run_watches", "--all")
    upstream.queue(Reply.events(*cited_answer_stream(FIRST)))
    call_command("run_watches", "--all")
    assert list(WatchRun.objects.values_list("state", flat=True)) == ["changed", "changed"]

    header = browser.get(reverse("chat_list")).content.decode()
    assert '>Changes <span class="changes-count" aria-label="1 unseen">1</span></a>' in header
    browser.get(reverse("watch_changes"))
    assert "changes-count" not in browser.get(reverse("chat_list")).content.decode()


def test_an_unchanged_answer_is_no_change(watched, upstream, browser):
    upstream.queue(Reply.events(*cited_answer_stream(FIRST)))
    call_command("run_watches", "--all")
    assert WatchRun.objects.get().state == "unchanged"
    assert "changes-count" not in browser.get(reverse("chat_list")).content.decode()


def test_run_watches_runs_only_due_watches_without_all(watched, upstream):
    call_command("run_watches")
    assert upstream.requests == [] and not WatchRun.objects.exists()


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


def test_a_limit_skips_the_run_and_tries_again_soon(watched, upstream, user, settings):
    settings.AGENT_MAX_CONCURRENT_TURNS = 1
    busy = Chat.objects.create(owner=user)
    Turn.objects.create(
        chat=busy, question="Busy", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    call_command("run_watches", "--all")
    run = WatchRun.objects.get()
    assert run.state == "skipped" and "answers being written" in run.error
    assert upstream.requests == []
    retry = Watch.objects.get().next_run_at - timezone.now()
    assert timedelta(minutes=14) < retry <= timedelta(minutes=15)


def test_repeated_failures_stop_the_watch_and_the_analyst_is_told(
    watched, upstream, browser, settings, user
):
    settings.WATCH_EMAIL = True
    user.email = "analyst@example.com"
    user.save()
    for _ in range(settings.WATCH_MAX_FAILURES):
        upstream.queue(Reply.error(400, "bad request"))
        call_command("run_watches", "--all")
    assert Watch.objects.get().state == "stopped"
    assert list(WatchRun.objects.values_list("state", flat=True)) == ["failed"] * 3
    call_command("run_watches", "--all")  # a stopped watch is not run
    assert WatchRun.objects.count() == 3

    header = browser.get(reverse("chat_list")).content.decode()
    assert '>Changes <span class="changes-count" aria-label="1 unseen">1</span></a>' in header
    changes = browser.get(reverse("watch_changes")).content.decode()
    assert "Stopped after 3 failed runs in a row" in changes
    assert "changes-count" not in browser.get(reverse("chat_list")).content.decode()
    [email] = mail.outbox
    assert email.subject == "Watch stopped: How did revenue do?"
    assert email.to == ["analyst@example.com"]

    browser.post(reverse("watch_resume", args=[watched.pk]))
    assert Watch.objects.get().state == "active"


def test_a_change_is_emailed_when_email_is_on(watched, upstream, settings, user):
    settings.WATCH_EMAIL = True
    user.email = "analyst@example.com"
    user.save()
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("run_watches", "--all")
    [email] = mail.outbox
    assert "2 figures changed, 1 source added, 1 dropped" in email.body
    assert "12% → 14%, $4.1 billion → $4.2 billion" in email.body


def test_no_email_unless_configured(watched, upstream, user):
    user.email = "analyst@example.com"
    user.save()
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("run_watches", "--all")
    assert mail.outbox == []


def test_pause_and_delete_from_the_changes_page(watched, upstream, browser):
    browser.post(reverse("watch_pause", args=[watched.pk]))
    assert Watch.objects.get().state == "paused"
    call_command("run_watches", "--all")
    assert upstream.requests == []
    browser.post(reverse("watch_delete", args=[watched.pk]))
    assert not Watch.objects.exists()


def test_another_users_watch_cannot_be_touched(watched, other_user):
    intruder = HttpClient()
    intruder.force_login(other_user)
    assert intruder.post(reverse("watch_delete", args=[watched.pk])).status_code == 404
    assert intruder.post(reverse("watch_pause", args=[watched.pk])).status_code == 404
    assert Watch.objects.get().state == "active"
    new_url = reverse("watch_new", args=[watched.chat_id, watched.turn_id])
    assert intruder.post(new_url, {"every": "day", "time_of_day": "09:00"}).status_code == 404


def test_watch_form_sets_a_watch_and_refuses_bad_input(user, chat, browser):
    turn = answered_turn(chat)
    url = reverse("watch_new", args=[chat.pk, turn.pk])
    assert ">Every" in browser.get(url).content.decode()
    refused = browser.post(url, {"every": "hour", "time_of_day": "09:00"})
    assert refused.status_code == 400 and "Every must be" in refused.content.decode()
    refused = browser.post(url, {"every": "day", "time_of_day": "nine"})
    assert "Choose a time of day" in refused.content.decode()
    created = browser.post(url, {"every": "week", "weekday": "2", "time_of_day": "07:30"})
    assert created.status_code == 302
    watch = Watch.objects.get()
    assert (watch.every, watch.weekday, watch.time_of_day) == ("week", 2, time(7, 30))
    assert (
        "Every week on Wednesday at 07:30" in browser.get(reverse("watch_changes")).content.decode()
    )
    again = browser.post(url, {"every": "day", "time_of_day": "09:00"})
    assert "watching this answer already" in again.content.decode()


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
        wait_until(lambda: WatchRun.objects.exclude(state="running").exists())
    assert WatchRun.objects.get().state == "changed"
    assert Turn.objects.filter(chat=watched.chat).count() == 2


def wait_until(condition, timeout: float = 30) -> None:
    import time as clock

    deadline = clock.monotonic() + timeout
    while not condition():
        assert clock.monotonic() < deadline, "timed out"
        clock.sleep(0.05)
