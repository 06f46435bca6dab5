"""Answers that end together are stored in one trip; one the database refuses fails alone."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chats.agent.bigdata import event_from_message
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn
from chats.runner import Finish, _store_finishes
from chats.services import turn_start
from demo_agent.scripted import answer_stream
from tests.chats.refusals import refusals_fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refuse_rows():
    yield from refusals_fixture()


def started_turns(django_user_model, count: int):
    users = [django_user_model.objects.create_user(f"a{i}", password="pw") for i in range(count)]
    return [
        turn_start(chat=Chat.objects.create(owner=u), question="Q", research_effort="lite")
        for u in users
    ]


def finish_of(started, text: str, *, siblings: bool = True) -> Finish:
    events = [event_from_message(m) for m in answer_stream(text)]
    return Finish(
        turn_id=started.turn.pk,
        transcript=Transcript.from_events(events),
        status=Turn.Status.COMPLETE,
        error="",
        error_kind="",
        malformed_lines=0,
        sanitized_events=0,
        siblings=started.siblings if siblings else None,
    )


def test_an_answer_the_database_refuses_fails_alone_in_its_batch(django_user_model, refuse_rows):
    refuse_rows("chats_turn", "answer_text", "REFUSE-ME", "UPDATE")
    turns = started_turns(django_user_model, 3)
    texts = ["First answer.", "An answer with REFUSE-ME in it.", "Third answer."]
    outcomes = _store_finishes([finish_of(s, t) for s, t in zip(turns, texts, strict=True)])
    assert isinstance(outcomes[1], Exception)
    for index in (0, 2):
        turn, card = outcomes[index]
        assert card is not None and card["type"] == "turn.finished"
        assert Turn.objects.get(pk=turn.pk).answer_text == texts[index]
    assert Turn.objects.get(pk=turns[1].turn.pk).status == Turn.Status.STREAMING


def test_a_turn_finished_already_is_left_as_it_is(django_user_model):
    (started,) = started_turns(django_user_model, 1)
    Turn.objects.filter(pk=started.turn.pk).update(status=Turn.Status.INTERRUPTED)
    assert _store_finishes([finish_of(started, "Late answer.")]) == [None]
    assert Turn.objects.get(pk=started.turn.pk).answer_text == ""


def test_the_final_card_needs_no_query_for_siblings_the_run_knows(django_user_model):
    known, unknown = started_turns(django_user_model, 2)
    with CaptureQueriesContext(connection) as with_siblings:
        _store_finishes([finish_of(known, "Answer.")])
    with CaptureQueriesContext(connection) as without:
        _store_finishes([finish_of(unknown, "Answer.", siblings=False)])
    assert len(with_siblings.captured_queries) == len(without.captured_queries) - 1
