"""The review admin's watches and their runs, filtered by user and state."""

from __future__ import annotations

from datetime import time

import pytest
from django.urls import reverse
from django.utils import timezone

from chats.models import Chat, Turn, Watch, WatchRun

pytestmark = pytest.mark.django_db


def listed(response) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


@pytest.fixture
def watches(django_user_model):
    made = {}
    for name, state in [("ana", "active"), ("ben", "paused")]:
        user = django_user_model.objects.create_user(name)
        chat = Chat.objects.create(owner=user)
        turn = Turn.objects.create(chat=chat, question=f"{name}'s question", status="complete")
        watch = Watch.objects.create(
            owner=user, chat=chat, turn=turn, time_of_day=time(9), state=state,
            next_run_at=timezone.now(),
        )  # fmt: skip
        run = WatchRun.objects.create(
            watch=watch, state="changed" if name == "ana" else "failed", summary="1 figure changed"
        )
        made[name] = (user, watch, run)
    return made


def test_watches_filter_by_user_and_state(admin_client, watches):
    url = reverse("admin:chats_watch_changelist")
    ana, ana_watch, _ = watches["ana"]
    _, ben_watch, _ = watches["ben"]
    assert listed(admin_client.get(url)) == {ana_watch.pk, ben_watch.pk}
    assert listed(admin_client.get(url, {"owner__id__exact": ana.pk})) == {ana_watch.pk}
    assert listed(admin_client.get(url, {"state__exact": "paused"})) == {ben_watch.pk}
    page = admin_client.get(reverse("admin:chats_watch_change", args=[ana_watch.pk]))
    assert "1 figure changed" in page.content.decode()  # its runs, inline


def test_watch_runs_filter_by_user_and_state(admin_client, watches):
    url = reverse("admin:chats_watchrun_changelist")
    ben, _, ben_run = watches["ben"]
    _, _, ana_run = watches["ana"]
    assert listed(admin_client.get(url, {"watch__owner__id__exact": ben.pk})) == {ben_run.pk}
    assert listed(admin_client.get(url, {"state__exact": "changed"})) == {ana_run.pk}
