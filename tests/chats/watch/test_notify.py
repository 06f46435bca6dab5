"""E-mail about a watch's change, when the site sends e-mail."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse

from chats.watch.models import WatchRun
from chats.watch.notify import tell_analyst
from chats.watch.services import watch_email_set
from demo_agent.scripted import Reply, cited_answer_stream
from tests.chats.watch.answers import SECOND
from tests.servers import free_port
from tests.standins.smtp import smtp_receiver

pytestmark = pytest.mark.django_db(transaction=True)


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


# --- "E-mail me when it changes", through a real SMTP server --------------------------------


@pytest.fixture
def inbox(settings):
    settings.WATCH_EMAIL = True
    with smtp_receiver(settings) as inbox:
        yield inbox


def run_with_changed_figures(upstream) -> WatchRun:
    upstream.queue(Reply.events(*cited_answer_stream(SECOND)))
    call_command("run_watches", "--all")
    return WatchRun.objects.select_related("watch__owner", "watch__turn").get()


def test_a_change_sends_one_message_naming_its_figures_and_compare(watched, upstream, user, inbox):
    user.email = "analyst@research.example"
    user.save()
    run = run_with_changed_figures(upstream)
    [(recipients, message)] = inbox.messages
    assert recipients == ["analyst@research.example"]
    assert message["Subject"] == "Changed: How did revenue do?"
    body = message.get_content().replace("\r\n", "\n")
    assert "The answer to “How did revenue do?” changed: 2 figures changed" in body
    assert "- 12% → 14%: Revenue rose 14% to $4.2 billion." in body
    assert "Sources added:\n- Nikkei - 2026-04-15 (https://news.example/doc-nikkei)" in body
    assert "Sources dropped:\n- Bloomberg - 2026-04-15" in body
    compare = reverse("turn_compare", args=[watched.chat_id, run.turn_id])
    assert f"http://127.0.0.1:8000{compare}?a={run.previous_turn_id}&b={run.turn_id}" in body
    assert run.emailed_at is not None


def test_a_retried_task_sends_no_second_message(watched, upstream, user, inbox):
    user.email = "analyst@research.example"
    user.save()
    run = run_with_changed_figures(upstream)
    assert tell_analyst(run=run) is False  # the run recorded again, as a retried task does
    assert tell_analyst(run=WatchRun.objects.get(pk=run.pk)) is False
    assert len(inbox.messages) == 1


def test_a_watch_with_email_off_sends_none(watched, upstream, user, inbox):
    user.email = "analyst@research.example"
    user.save()
    watch_email_set(watch=watched, email_changes=False)
    run_with_changed_figures(upstream)
    assert inbox.messages == []


def test_a_message_the_server_refused_is_sent_by_the_next_try(watched, upstream, user, settings):
    settings.WATCH_EMAIL = True
    user.email = "analyst@research.example"
    user.save()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens
    run = run_with_changed_figures(upstream)  # recorded; the e-mail failed, and is logged
    assert run.state == WatchRun.State.CHANGED and run.emailed_at is None
    with smtp_receiver(settings) as inbox:
        assert tell_analyst(run=run) is True
    assert len(inbox.messages) == 1
