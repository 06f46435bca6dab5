"""Pages over HTTP: login, the chat list, a chat, branch switching, export, isolation, CSRF."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.core.management import call_command
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chats.models import Chat, Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_pages_need_a_login(client, chat):
    for url in (reverse("chat_list"), reverse("chat_detail", args=[chat.pk])):
        response = client.get(url)
        assert response.status_code == HTTPStatus.FOUND
        assert response["Location"].startswith(reverse("login"))


def test_the_list_shows_only_my_chats_newest_first(logged_in, user, other_user):
    old = Chat.objects.create(
        owner=user, title="Old one", updated_at=timezone.now() - timedelta(days=2)
    )
    new = Chat.objects.create(owner=user, title="New one")
    Chat.objects.create(owner=other_user, title="Not mine")
    html = logged_in.get(reverse("chat_list")).content.decode()
    assert html.index("New one") < html.index("Old one")
    assert "Not mine" not in html
    assert f"/chats/{new.pk}/" in html and f"/chats/{old.pk}/" in html
    assert "New chat" in html


def test_pages_name_their_icon_so_browsers_do_not_ask_for_a_missing_one(logged_in):
    from django.contrib.staticfiles import finders
    from django.templatetags.static import static

    page = logged_in.get(reverse("chat_list")).content.decode()
    assert f'<link rel="icon" href="{static("chats/favicon.svg")}"' in page
    assert finders.find("chats/favicon.svg") is not None


def test_new_chat_is_a_post_and_opens_the_chat(logged_in, user):
    assert logged_in.get(reverse("chat_new")).status_code == HTTPStatus.METHOD_NOT_ALLOWED
    response = logged_in.post(reverse("chat_new"))
    chat = Chat.objects.get(owner=user)
    assert response["Location"] == reverse("chat_detail", args=[chat.pk])


def test_forms_carry_csrf(user):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(reverse("chat_new")).status_code == HTTPStatus.FORBIDDEN
    page = strict.get(reverse("chat_list"))
    token = page.cookies["csrftoken"].value
    assert (
        strict.post(reverse("chat_new"), {"csrfmiddlewaretoken": token}).status_code
        == HTTPStatus.FOUND
    )


def test_the_chat_page_renders_past_turns_and_the_composer(logged_in, chat):
    Turn.objects.create(
        chat=chat,
        question="What did <b>NVIDIA</b> earn?",
        status="complete",
        answer_text="A lot.",
        answer_html="<p>A lot.<sup>1</sup></p>",
    )
    html = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "What did &lt;b&gt;NVIDIA&lt;/b&gt; earn?" in html  # questions are escaped
    assert "<p>A lot.<sup>1</sup></p>" in html  # the stored, sanitised cited answer
    assert 'for="message">Message</label>' in html
    assert ">Send</button>" in html
    assert "Continue from here" in html
    assert 'value="lite"' in html and 'value="standard"' in html


def test_another_users_chat_is_404_everywhere(client, other_user, chat):
    turn = Turn.objects.create(chat=chat, question="secret question", status="complete")
    client.force_login(other_user)
    assert client.get(reverse("chat_detail", args=[chat.pk])).status_code == HTTPStatus.NOT_FOUND
    assert client.get(reverse("chat_export", args=[chat.pk])).status_code == HTTPStatus.NOT_FOUND
    response = client.post(reverse("chat_branch_select", args=[chat.pk]), {"turn_id": turn.pk})
    assert response.status_code == HTTPStatus.NOT_FOUND


def test_branch_switching_is_remembered(logged_in, chat):
    one = Turn.objects.create(chat=chat, question="Version one", status="complete")
    two = Turn.objects.create(chat=chat, question="Version two", status="complete")
    chat.active_turn = two
    chat.save()
    response = logged_in.post(reverse("chat_branch_select", args=[chat.pk]), {"turn_id": one.pk})
    assert response.status_code == HTTPStatus.FOUND
    html = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "Version one" in html and "Version two" not in html
    assert "1 / 2" in html


def test_branch_switching_refuses_foreign_turns(logged_in, chat, other_user):
    foreign = Turn.objects.create(chat=Chat.objects.create(owner=other_user), question="x")
    response = logged_in.post(
        reverse("chat_branch_select", args=[chat.pk]), {"turn_id": foreign.pk}
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    response = logged_in.post(reverse("chat_branch_select", args=[chat.pk]), {"turn_id": "nope"})
    assert response.status_code == HTTPStatus.BAD_REQUEST


def test_export_downloads_the_visible_branch_as_markdown(logged_in, chat):
    Turn.objects.create(
        chat=chat, question="First question", status="complete", answer_text="First answer."
    )
    response = logged_in.get(reverse("chat_export", args=[chat.pk]))
    assert response["Content-Type"].startswith("text/markdown")
    assert "attachment" in response["Content-Disposition"]
    body = response.content.decode()
    assert "First question" in body and "First answer." in body


def test_ensure_account_creates_admin_once(tmp_path, settings, capsys, monkeypatch):
    from chats.management.commands import ensure_account

    monkeypatch.setattr(ensure_account, "PASSWORD_FILE", tmp_path / "admin-password")
    settings.LOCAL_DIR = tmp_path
    call_command("ensure_account")
    first = capsys.readouterr().out
    password = (tmp_path / "admin-password").read_text().strip()
    assert password in first
    assert Client().login(request=HttpRequest(), username="admin", password=password)  # axes
    call_command("ensure_account")
    second = capsys.readouterr().out
    assert password not in second
    assert "existing account" in second


def test_a_finished_answer_shows_how_it_was_researched(logged_in, chat):
    from citations.models import AuditTrace

    plan = {
        "title": "Earnings <review>",
        "steps": [
            {"description": "Find it", "status": "COMPLETED"},
            {"description": "Read it", "status": "IN_PROGRESS"},
        ],
    }
    turn = Turn.objects.create(
        chat=chat, question="q", status="complete", tool_error_count=1, plan=plan
    )
    AuditTrace.objects.create(
        turn=turn, position=0, audit_type="SearchAuditV1", title="NVIDIA <margins>", data={}
    )
    AuditTrace.objects.create(
        turn=turn, position=1, audit_type="MarkdownAuditV1", title="Earnings calendar", data={}
    )
    html = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "How this answer was researched: 2 tool calls, 1 failed" in html
    assert "<li>Searched: NVIDIA &lt;margins&gt;</li>" in html
    assert "<li>Earnings calendar</li>" in html
    assert "Earnings &lt;review&gt;" in html  # the final plan, escaped
    assert "Find it" in html
    # The same words as while it streamed (chats.answer.display), not "inprogress".
    assert 'Read it <span class="step-status">in progress</span>' in html


def test_the_chat_page_costs_the_same_queries_for_many_turns(
    logged_in, chat, django_assert_max_num_queries
):
    from citations.models import AuditTrace

    parent = None
    for i in range(30):
        parent = Turn.objects.create(chat=chat, parent=parent, question=f"q{i}", status="complete")
        AuditTrace.objects.create(turn=parent, position=0, audit_type="SearchAuditV1", data={})
    logged_in.get(reverse("chat_list"))  # the session's first page copies the user's theme
    # Session, user, chat, turns, their traces, the newest turn id, the sidebar's chats, the
    # chat's share, the user's saved output schemas, the header's count of unseen changes, and
    # this month's usage warning (the theme is the session's): none of them grows with the turns.
    with django_assert_max_num_queries(11):
        response = logged_in.get(reverse("chat_detail", args=[chat.pk]))
    assert response.content.decode().count('class="turn"') == 30


def test_the_chat_page_takes_its_limits_and_titles_from_the_server(logged_in, chat, settings):
    settings.MESSAGE_MAX_CHARS = 123
    html = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert 'maxlength="123"' in html
    assert 'data-message-max-chars="123"' in html
    assert "<title>Untitled chat · ResearchSite</title>" in html
    chat.title = "Margins <b>"
    chat.save()
    html = logged_in.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "<title>Margins &lt;b&gt; · ResearchSite</title>" in html
    assert "<h1>Margins &lt;b&gt;</h1>" in html
