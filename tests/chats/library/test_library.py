"""Organising chats: the sidebar's groups, rename, pin, archive, delete, exports, the print page."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse

from chats.agent.events import ChartEvent
from chats.answer.charts import chart_for_turn
from chats.library.search import chat_search_for_user
from chats.library.selectors import chat_sidebar_for_user
from chats.models import Chat
from tests.chats.library_factories import bigdata_source, finished_turn

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 15, 0, tzinfo=UTC)


@pytest.fixture
def analyst(django_user_model):
    return django_user_model.objects.create_user("analyst", password="pw-analyst-123")


@pytest.fixture
def intruder(django_user_model):
    return django_user_model.objects.create_user("intruder", password="pw-intruder-123")


@pytest.fixture
def logged_in(client, analyst):
    client.force_login(analyst)
    return client


@pytest.fixture
def chat(analyst):
    chat = Chat.objects.create(owner=analyst, title="Copper outlook")
    finished_turn(
        chat,
        "What is the copper outlook?",
        "Prices should rise.",
        sources=[bigdata_source("cu-1", name="Mining Weekly", headline="Copper squeeze")],
    )
    return chat


def test_sidebar_groups_pinned_today_previous_7_days_older_without_archived(analyst, intruder):
    def make(title, age, **fields):
        return Chat.objects.create(owner=analyst, title=title, updated_at=NOW - age, **fields)

    make("old pinned", timedelta(days=40), pinned=True)
    make("this morning", timedelta(hours=14))
    make("yesterday", timedelta(days=1))
    make("six days ago", timedelta(days=6))
    make("last month", timedelta(days=30))
    make("archived", timedelta(hours=1), archived_at=NOW)
    Chat.objects.create(owner=intruder, title="theirs", updated_at=NOW)

    groups = chat_sidebar_for_user(user=analyst, now=NOW)

    assert [(g.label, [c.title for c in g.chats]) for g in groups] == [
        ("Pinned", ["old pinned"]),
        ("Today", ["this morning"]),
        ("Previous 7 days", ["yesterday", "six days ago"]),
        ("Older", ["last month"]),
    ]


def test_rename_updates_the_title_and_the_search_index(logged_in, analyst, chat):
    response = logged_in.post(reverse("chat_rename", args=[chat.pk]), {"title": "  Red   metal "})

    assert response.status_code == HTTPStatus.FOUND
    chat.refresh_from_db()
    assert chat.title == "Red metal"
    assert [r.chat for r in chat_search_for_user(user=analyst, query="red metal")] == [chat]
    page = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "Red metal" in page


def test_rename_answers_json_when_asked_and_refuses_a_blank_title(logged_in, chat):
    url = reverse("chat_rename", args=[chat.pk])
    response = logged_in.post(
        url, {"title": "Copper, again"}, headers={"Accept": "application/json"}
    )
    assert response.json() == {
        "ok": True,
        "title": "Copper, again",
        "page_title": "Copper, again · ResearchSite",
    }

    response = logged_in.post(url, {"title": "   "}, headers={"Accept": "application/json"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    chat.refresh_from_db()
    assert chat.title == "Copper, again"


def test_pin_and_unpin(logged_in, analyst, chat):
    logged_in.post(reverse("chat_pin", args=[chat.pk]), {"pinned": "1"})
    assert chat_sidebar_for_user(user=analyst)[0].label == "Pinned"
    page = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert ">Unpin</button>" in page

    logged_in.post(reverse("chat_pin", args=[chat.pk]), {"pinned": "0"})
    assert [g.label for g in chat_sidebar_for_user(user=analyst)] == ["Today"]


def test_archive_leaves_the_list_and_shows_under_archived_until_unarchived(logged_in, chat):
    chat_url = reverse("chat_detail", args=[chat.pk])
    response = logged_in.post(reverse("chat_archive", args=[chat.pk]), {"archived": "1"})
    assert response["Location"] == reverse("chat_list")
    assert chat_url not in logged_in.get(reverse("chat_list")).content.decode()
    archived_page = logged_in.get(reverse("chat_archived")).content.decode()
    assert chat_url in archived_page and "Unarchive" in archived_page
    # Still found by search, and still opens.
    assert logged_in.get(chat_url).status_code == HTTPStatus.OK

    response = logged_in.post(
        reverse("chat_archive", args=[chat.pk]),
        {"archived": "0", "next": reverse("chat_archived")},
    )
    assert response["Location"] == reverse("chat_archived")
    assert chat_url in logged_in.get(reverse("chat_list")).content.decode()


def test_back_redirect_refuses_another_site(logged_in, chat):
    response = logged_in.post(
        reverse("chat_pin", args=[chat.pk]), {"pinned": "1", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("chat_detail", args=[chat.pk])


def test_delete_removes_the_chat_and_its_search_document(logged_in, analyst, chat):
    response = logged_in.post(reverse("chat_delete", args=[chat.pk]))

    assert response["Location"] == reverse("chat_list")
    assert not Chat.objects.filter(pk=chat.pk).exists()
    assert chat_search_for_user(user=analyst, query="copper") == []


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("chat_rename", {"title": "Mine now"}),
        ("chat_pin", {"pinned": "1"}),
        ("chat_archive", {"archived": "1"}),
        ("chat_delete", {}),
        ("chat_share", {}),
        ("chat_unshare", {}),
    ],
)
def test_another_users_chat_is_404_and_unchanged(client, intruder, chat, name, data):
    client.force_login(intruder)

    response = client.post(reverse(name, args=[chat.pk]), data)

    assert response.status_code == HTTPStatus.NOT_FOUND
    unchanged = Chat.objects.get(pk=chat.pk)
    assert (unchanged.title, unchanged.pinned, unchanged.archived_at) == (
        "Copper outlook",
        False,
        None,
    )
    assert not unchanged.shares.exists()


@pytest.mark.parametrize("name", ["chat_rename", "chat_pin", "chat_archive", "chat_delete"])
def test_actions_are_post_only_and_csrf_checked(analyst, chat, name):
    client = Client(enforce_csrf_checks=True)
    client.force_login(analyst)
    url = reverse(name, args=[chat.pk])

    assert client.get(url).status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert client.post(url, {"title": "x", "pinned": "1"}).status_code == HTTPStatus.FORBIDDEN
    assert Chat.objects.filter(pk=chat.pk, title="Copper outlook", pinned=False).exists()


def test_library_pages_need_a_login(client, chat):
    for url in [reverse("chat_search"), reverse("chat_archived"), reverse("chat_print", args=[1])]:
        response = client.get(url)
        assert response.status_code == HTTPStatus.FOUND
        assert response["Location"].startswith(reverse("login"))


def test_chat_page_offers_the_library_actions(logged_in, chat):
    page = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()

    for label in ["Rename", ">Pin<", ">Archive<", "Delete chat", ">Share<", "Export JSON"]:
        assert label in page, label
    assert 'for="chat-search">Search chats</label>' in page


def test_json_export_has_turns_references_and_sources(logged_in, chat):
    response = logged_in.get(reverse("chat_export_json", args=[chat.pk]))

    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="chat-{chat.pk}.json"'
    data = json.loads(response.content)
    assert data["chat"]["title"] == "Copper outlook"
    [turn] = data["turns"]
    assert turn["question"] == "What is the copper outlook?"
    assert turn["answer"] == "Prices should rise."
    assert [s["name"] for s in turn["sources"]] == ["Mining Weekly"]
    assert [(r["start"], r["end"], r["footnote"]) for r in turn["references"]] == [(0, 19, 1)]
    assert [c["check"]["status"] for c in turn["claims"]] == ["not read"]  # the claim check


def test_json_export_carries_charts_and_structured_output(logged_in, chat):
    """What the Markdown export holds: each chart's spec and data, and the structured output."""
    turn = chat.turns.get()
    chart = chart_for_turn(
        ChartEvent(
            chart_id="c1",
            title="Copper price",
            chart_type="line",
            vega_lite_spec={
                "mark": "line",
                "data": {"values": [{"year": 2024, "usd": 9.1}, {"year": 2025, "usd": 9.8}]},
                "encoding": {
                    "x": {"field": "year", "type": "ordinal"},
                    "y": {"field": "usd", "type": "quantitative"},
                },
            },
            caption="USD per kg.",
        ),
        turn.answer_text,
    )
    turn.charts = [chart]
    turn.structured_output = [{"metal": "copper", "outlook": "up"}]
    turn.save(update_fields=["charts", "structured_output"])

    data = json.loads(logged_in.get(reverse("chat_export_json", args=[chat.pk])).content)

    [exported] = data["turns"]
    [exported_chart] = exported["charts"]
    assert exported_chart["title"] == "Copper price" and exported_chart["caption"] == "USD per kg."
    assert exported_chart["spec"] == chart["spec"] and exported_chart["spec"]["mark"] == "line"
    assert exported_chart["table"]["columns"] == ["year", "usd"]
    assert exported_chart["table"]["rows"] == [["2024", "9.1"], ["2025", "9.8"]]
    assert exported["structured_output"] == [{"metal": "copper", "outlook": "up"}]
    markdown = logged_in.get(reverse("chat_export", args=[chat.pk])).content.decode()
    assert "Copper price" in markdown and "copper" in markdown  # the same content as export.md


def test_json_export_of_another_users_chat_is_404(client, intruder, chat):
    client.force_login(intruder)
    assert client.get(reverse("chat_export_json", args=[chat.pk])).status_code == 404


def test_print_page_shows_the_cited_answer_without_the_composer(logged_in, chat):
    page = logged_in.get(reverse("chat_print", args=[chat.pk])).content.decode()

    assert chat.turns.get().answer_html in page
    assert "Print or save as PDF" in page
    assert 'id="message"' not in page and "Continue from here" not in page
