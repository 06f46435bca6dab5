"""The JSON export of a chat's visible branch: each turn with every version of its question."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chats.models import Chat
from tests.chats.library_factories import finished_turn

pytestmark = pytest.mark.django_db


def test_the_export_reads_the_turns_once_and_numbers_each_version(client, user):
    chat = Chat.objects.create(owner=user)
    first = finished_turn(chat, "Revenue?", "Up 12%.", parent=None)
    edited = finished_turn(chat, "Revenue in 2025?", "Up 14%.", parent=None)
    follow = finished_turn(chat, "Why?", "Demand.", parent=edited)
    rerun = finished_turn(chat, "Why?", "Strong demand.", parent=edited)
    client.force_login(user)

    with CaptureQueriesContext(connection) as read:
        response = client.get(reverse("chat_export_json", args=[chat.pk]))

    turn_reads = [q for q in read.captured_queries if 'FROM "chats_turn"' in q["sql"]]
    assert len(turn_reads) == 1
    exported = json.loads(response.content)["turns"]
    assert [(t["id"], t["version"]) for t in exported] == [(edited.pk, 2), (rerun.pk, 2)]
    assert [[v["id"] for v in t["versions"]] for t in exported] == [
        [first.pk, edited.pk],
        [follow.pk, rerun.pk],
    ]
    assert exported[1]["versions"][0]["answer"] == "Demand."
