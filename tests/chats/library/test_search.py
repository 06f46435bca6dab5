"""Searching past chats: the same behaviour on SQLite (FTS5) and PostgreSQL (tsvector)."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from http import HTTPStatus
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from chats.agent.transcript import Transcript
from chats.library.search import (
    chat_search_for_user,
    chat_search_index_rebuild,
    chat_search_index_update,
    chats_due_for_search,
)
from chats.models import Chat, ChatSearchDocument, Turn
from chats.run.finishes import finish_turn
from chats.services import turn_start
from tests.chats.library_factories import bigdata_source, finished_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def analyst(django_user_model):
    return django_user_model.objects.create_user("analyst", password="pw-analyst-123")


@pytest.fixture
def intruder(django_user_model):
    return django_user_model.objects.create_user("intruder", password="pw-intruder-123")


def titles(results) -> list[str]:
    return [r.chat.title for r in results]


def test_finds_a_chat_by_a_word_of_its_answer_question_source_name_and_headline(analyst):
    chat = Chat.objects.create(owner=analyst, title="Chip makers")
    finished_turn(
        chat,
        "How did the data center business do?",
        "Revenue from **hyperscalers** rose sharply.",
        sources=[bigdata_source("d1", name="Bloomberg", headline="Quarterly shipments surge")],
    )
    Chat.objects.create(owner=analyst, title="Unrelated")

    for query in ["hyperscalers", "center", "Bloomberg", "shipments", "revenue hyperscalers"]:
        assert titles(chat_search_for_user(user=analyst, query=query)) == ["Chip makers"], query


def test_stemming_and_prefix_of_the_last_word(analyst):
    chat = Chat.objects.create(owner=analyst, title="Margins")
    finished_turn(chat, "What happened to margins?", "Gross margins were improving steadily.")

    assert titles(chat_search_for_user(user=analyst, query="improve")) == ["Margins"]
    assert titles(chat_search_for_user(user=analyst, query="gross stead")) == ["Margins"]
    assert chat_search_for_user(user=analyst, query="gross declined") == []


def test_only_the_users_own_chats(analyst, intruder):
    mine = Chat.objects.create(owner=analyst, title="Mine")
    finished_turn(mine, "Q", "The semiconductor outlook is bright.")
    theirs = Chat.objects.create(owner=intruder, title="Theirs")
    finished_turn(theirs, "Q", "The semiconductor outlook is dim.")

    assert titles(chat_search_for_user(user=analyst, query="semiconductor")) == ["Mine"]
    assert titles(chat_search_for_user(user=intruder, query="semiconductor")) == ["Theirs"]


def test_ranked_title_matches_first_then_more_mentions(analyst):
    once = Chat.objects.create(owner=analyst, title="Energy")
    finished_turn(once, "Q", "Batteries are mentioned once here among many other words.")
    often = Chat.objects.create(owner=analyst, title="Storage")
    finished_turn(often, "Q", "Batteries, batteries and batteries: batteries everywhere.")
    titled = Chat.objects.create(owner=analyst, title="Batteries")
    finished_turn(titled, "Q", "Nothing else to see.")

    assert titles(chat_search_for_user(user=analyst, query="batteries")) == [
        "Batteries",
        "Storage",
        "Energy",
    ]


def test_snippets_escape_the_text_and_mark_only_the_matches(analyst):
    chat = Chat.objects.create(owner=analyst, title="<b>Bold</b> title")
    finished_turn(chat, '<script>alert("x")</script> tariff?', 'R&D "tariff" <b>rose</b>.')

    [result] = chat_search_for_user(user=analyst, query="tariff")
    # PostgreSQL's headline drops what looks like a tag, FTS5 keeps it: either way, as text.
    assert "<script" not in result.snippet_html and "<b>" not in result.snippet_html
    assert "R&amp;D &quot;<mark>tariff</mark>&quot;" in result.snippet_html
    assert result.snippet_html.replace("<mark>", "").replace("</mark>", "").count("<") == 0
    assert result.title_html == "&lt;b&gt;Bold&lt;/b&gt; title"
    [result] = chat_search_for_user(user=analyst, query="bold")
    assert "<mark>Bold</mark>" in result.title_html


def test_stored_sentinel_characters_cannot_forge_marks(analyst):
    chat = Chat.objects.create(owner=analyst, title="Forged")
    finished_turn(chat, "Q", "Evil \ue000text\ue001 and the word lithium.")

    [result] = chat_search_for_user(user=analyst, query="lithium")
    assert result.snippet_html.count("<mark>") == 1


def test_query_syntax_is_taken_as_words(analyst):
    chat = Chat.objects.create(owner=analyst, title="Syntax")
    finished_turn(chat, "Q", "Copper prices and nickel prices.")

    for query in [
        '"copper',
        "copper AND (",
        "copper & | !",
        "copper:*",
        "copper)",
        "-copper",
        "copper^",
    ]:
        assert titles(chat_search_for_user(user=analyst, query=query)) == ["Syntax"], query
    assert chat_search_for_user(user=analyst, query="  ¿?! ") == []


def test_the_index_follows_new_turns_renames_and_deletion(analyst):
    chat = Chat.objects.create(owner=analyst, title="First title")
    finished_turn(chat, "Q", "About cobalt.")
    assert titles(chat_search_for_user(user=analyst, query="zinc")) == []

    finished_turn(chat, "Follow-up", "Now about zinc.")
    assert titles(chat_search_for_user(user=analyst, query="zinc")) == ["First title"]

    Chat.objects.filter(pk=chat.pk).update(title="Renamed metals")
    chat_search_index_update(chat_id=chat.pk)
    assert titles(chat_search_for_user(user=analyst, query="renamed")) == ["Renamed metals"]
    assert chat_search_for_user(user=analyst, query="first") == []

    chat.delete()
    assert chat_search_for_user(user=analyst, query="zinc") == []
    assert not ChatSearchDocument.objects.exists()


@pytest.mark.django_db(transaction=True)  # no test transaction around it: the pass's own
def test_indexing_reads_the_chats_before_it_takes_the_write_lock(analyst):
    """The documents are read and built before the pass's transaction begins: on SQLite that
    transaction holds the one write lock, which every stream's event log waits for. Inside it,
    only the chats' titles are read again, and the documents written."""
    chat = Chat.objects.create(owner=analyst, title="Locks")
    finished_turn(chat, "Q", "About **cobalt**.", sources=[bigdata_source("d1", name="Reuters")])
    statements: list[tuple[str, bool]] = []

    def record(execute, sql, params, many, context):
        statements.append((sql.split(None, 1)[0].upper(), connection.in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        chat_search_index_update(chat_id=chat.pk)

    reads = [in_transaction for verb, in_transaction in statements if verb == "SELECT"]
    writes = [in_transaction for verb, in_transaction in statements if verb in {"INSERT", "UPDATE"}]
    # The chat, its turns, their sources; then the titles, under the lock.
    assert reads == [False, False, False, True]
    assert writes and all(writes)  # on SQLite bulk_create opens its own; PostgreSQL's UPDATE tells
    assert titles(chat_search_for_user(user=analyst, query="cobalt reuters")) == ["Locks"]


@contextmanager
def between_the_reads_and_the_write(action):
    """Run `action` once a pass has read its chats (three queries outside any transaction)
    and before it takes the write lock: as another request committing meanwhile would."""
    reads = 0

    def interleave(execute, sql, params, many, context):
        nonlocal reads
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("SELECT") and not connection.in_atomic_block:
            reads += 1
            if reads == 3:
                action()
        return result

    with connection.execute_wrapper(interleave):
        yield


@pytest.mark.django_db(transaction=True)
def test_a_chat_renamed_during_a_pass_keeps_its_new_title(analyst):
    chat = Chat.objects.create(owner=analyst, title="Old name")
    finished_turn(chat, "Q", "About zinc.")

    def rename() -> None:
        Chat.objects.filter(pk=chat.pk).update(title="New name")
        chat_search_index_update(chat_id=chat.pk)  # as the rename does, once

    with between_the_reads_and_the_write(rename):
        chat_search_index_update(chat_id=chat.pk)

    assert ChatSearchDocument.objects.get(chat=chat).title == "New name"
    assert titles(chat_search_for_user(user=analyst, query="new zinc")) == ["New name"]
    assert chat_search_for_user(user=analyst, query="old") == []


@pytest.mark.django_db(transaction=True)
def test_a_chat_deleted_during_a_pass_costs_the_others_nothing(analyst):
    kept = Chat.objects.create(owner=analyst, title="Kept")
    finished_turn(kept, "Q", "About tin.")
    deleted = Chat.objects.create(owner=analyst, title="Deleted")
    finished_turn(deleted, "Q", "About lead.")
    ChatSearchDocument.objects.all().delete()

    with between_the_reads_and_the_write(deleted.delete):
        assert chat_search_index_rebuild() == 2  # one batch, one transaction

    assert list(ChatSearchDocument.objects.values_list("chat_id", flat=True)) == [kept.pk]
    assert titles(chat_search_for_user(user=analyst, query="tin")) == ["Kept"]


def test_rebuild_command_indexes_every_chat(analyst):
    chat = Chat.objects.create(owner=analyst, title="Silver")
    finished_turn(chat, "Q", "Platinum demand.")
    ChatSearchDocument.objects.all().delete()
    assert chat_search_for_user(user=analyst, query="platinum") == []

    out = StringIO()
    call_command("rebuild_search_index", stdout=out)
    assert "1 chat" in out.getvalue()
    assert titles(chat_search_for_user(user=analyst, query="platinum")) == ["Silver"]


def test_search_page_lists_results_with_snippets(client, analyst, intruder):
    chat = Chat.objects.create(owner=analyst, title="Palladium")
    finished_turn(chat, "Q", "Palladium supply tightened.")
    theirs = Chat.objects.create(owner=intruder, title="Their palladium")
    finished_turn(theirs, "Q", "Palladium too.")
    client.force_login(analyst)

    response = client.get(reverse("chat_search"), {"q": "palladium"})

    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    assert reverse("chat_detail", args=[chat.pk]) in page
    assert "<mark>Palladium</mark> supply" in page
    assert "Their palladium" not in page


def test_a_turn_is_found_as_soon_as_it_finishes(analyst):
    chat = Chat.objects.create(owner=analyst)
    turn = turn_start(chat=chat, question="Which metal is scarce?", research_effort="standard").turn

    finish_turn(
        turn_id=turn.pk,
        transcript=Transcript(answer_parts=["Molybdenum is scarce."]),
        status=Turn.Status.COMPLETE,
    )

    assert titles(chat_search_for_user(user=analyst, query="molybdenum")) == [
        "Which metal is scarce?"
    ]


def test_only_the_newest_matches_are_ranked(analyst, monkeypatch):
    monkeypatch.setattr("chats.library.search.RANK_WINDOW", 2)
    for title in ["Tin", "Metals one", "Metals two"]:  # the oldest would rank first
        finished_turn(Chat.objects.create(owner=analyst, title=title), "Q", "About tin.")

    assert sorted(titles(chat_search_for_user(user=analyst, query="tin"))) == [
        "Metals one",
        "Metals two",
    ]
    assert titles(chat_search_for_user(user=analyst, query="tin metals")) == [
        "Metals one",
        "Metals two",
    ]  # equal ranks, in the same order on both databases


def test_the_snippet_shows_a_match_deep_in_a_long_chat(analyst):
    chat = Chat.objects.create(owner=analyst, title="Long")
    finished_turn(chat, "Q", "Filler words here. " * 400 + "Then vanadium appears.")

    [result] = chat_search_for_user(user=analyst, query="vanadium")
    assert "<mark>vanadium</mark> appears" in result.snippet_html


def test_a_chat_changed_after_its_document_was_written_is_due_again(analyst):
    """What a catch-up pass queues for the index, newest first: chats whose answers a process
    that died had not indexed yet, and chats never indexed; not chats whose documents are
    current, nor chats updated before the pass's window or within its last minute."""
    current = Chat.objects.create(owner=analyst, title="Current")
    finished_turn(current, "Q", "Indexed nickel.")
    behind = Chat.objects.create(owner=analyst, title="Behind")
    turn = finished_turn(behind, "Q", "Indexed tin.")
    never = Chat.objects.create(owner=analyst, title="Never indexed")
    old = Chat.objects.create(owner=analyst, title="Old")
    Chat.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=30))
    written_before = Chat.objects.create(owner=analyst, title="Indexed before the column")
    finished_turn(written_before, "Q", "Old lead.")
    ChatSearchDocument.objects.filter(chat=written_before).update(chat_updated_at=None)
    # The answer that finished as its process died: stored, its indexing still queued.
    Turn.objects.filter(pk=turn.pk).update(answer_text="Unindexed tungsten.")
    Chat.objects.filter(pk=behind.pk).update(updated_at=timezone.now())

    week_ago = timezone.now() - timedelta(days=7)
    assert chats_due_for_search(since=week_ago) == [behind.pk, written_before.pk, never.pk]
    assert chats_due_for_search(since=week_ago, until=timezone.now() - timedelta(minutes=1)) == []
    assert chat_search_for_user(user=analyst, query="tungsten") == []

    for chat_id in chats_due_for_search(since=week_ago):
        chat_search_index_update(chat_id=chat_id)
    assert titles(chat_search_for_user(user=analyst, query="tungsten")) == ["Behind"]
    assert chats_due_for_search(since=week_ago) == []


def test_a_renamed_chat_is_due_and_a_streaming_one_is_not(analyst):
    """A rename does not change updated_at: its document is due if it kept the old title (an
    indexing batch that read the chat before the rename wrote after it). A chat streaming a
    turn is left to its run, whose finish queues it."""
    renamed = Chat.objects.create(owner=analyst, title="Old name")
    finished_turn(renamed, "Q", "Copper.")
    Chat.objects.filter(pk=renamed.pk).update(title="New name")
    streaming = Chat.objects.create(owner=analyst, title="Streaming")
    Turn.objects.create(chat=streaming, question="Still answering?")
    marked = Chat.objects.create(owner=analyst, title="Snippet \ue000marks\ue001 typed in")
    finished_turn(marked, "Q", "Tin.")  # its document's title has the marks taken out
    week_ago = timezone.now() - timedelta(days=7)

    assert chats_due_for_search(since=week_ago) == [renamed.pk]
