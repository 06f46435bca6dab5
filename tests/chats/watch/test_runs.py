"""A watch's runs: each a new version compared with the one before; the header's "Changes"
count; limits and repeated failures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from chats.models import Chat, Turn, Watch, WatchRun
from demo_agent.scripted import Reply, cited_answer_stream
from tests.chats.watch.answers import FIRST, SECOND

pytestmark = pytest.mark.django_db(transaction=True)


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
