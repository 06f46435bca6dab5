"""The watch form and the Changes page's pause, resume and delete, for the watch's owner only."""

from __future__ import annotations

from datetime import time

import pytest
from django.core.management import call_command
from django.test import Client as HttpClient
from django.urls import reverse

from chats.models import Watch
from tests.chats.watch.answers import answered_turn

pytestmark = pytest.mark.django_db(transaction=True)


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


@pytest.mark.parametrize("at", ["09:00Z", "09:00+05:00", "09:00:00-03:30"])
def test_a_time_of_day_with_an_offset_is_refused_saying_why(chat, browser, at):
    """A watch's time of day is in the site's time zone: one with an offset (which SQLite
    cannot store) is refused, as is any time that is not one."""
    turn = answered_turn(chat)
    url = reverse("watch_new", args=[chat.pk, turn.pk])
    refused = browser.post(url, {"every": "day", "time_of_day": at})
    assert refused.status_code == 400
    assert "in the site&#x27;s time zone (UTC), with no offset" in refused.content.decode()
    assert not Watch.objects.exists()
