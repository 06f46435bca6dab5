"""E-mail about a watch's change, when the site sends e-mail."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.management import call_command

from demo_agent.scripted import Reply, cited_answer_stream
from tests.chats.watch.answers import SECOND

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
