"""Answers that end together are stored in one trip; one the database refuses fails alone."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chats.agent.providers.bigdata import event_from_message
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn
from chats.run.finishes import Finish, Stored, get_finish_batches, store_finishes
from chats.run.rendering import turn_end
from chats.services import turn_start
from citations.models import Reference
from demo_agent.scripted import answer_stream
from tests.chats.refusals import refusals_fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refuse_rows():
    yield from refusals_fixture()


def started_turns(django_user_model, count: int, prefix: str = "a"):
    users = [
        django_user_model.objects.create_user(f"{prefix}{i}", password="pw") for i in range(count)
    ]
    return [
        turn_start(chat=Chat.objects.create(owner=u), question="Q", research_effort="lite")
        for u in users
    ]


def cited_transcript(text: str) -> Transcript:
    """A complete answer whose first word cites a source of its own."""
    messages = answer_stream(text)
    grounding = {
        "type": "GROUNDING",
        "message_id": "a",
        "references": [
            {
                "start": 0,
                "end": len(text.split()[0]),
                "source": {"type": "BIGDATA", "id": f"doc-{text}", "hd": text, "src_name": "DJ"},
            }
        ],
    }
    return Transcript.from_events(
        event_from_message(m) for m in [*messages[:-1], grounding, messages[-1]]
    )


def finish_of(started, text: str, *, siblings: bool = True) -> Finish:
    end = turn_end(started.turn.pk, cited_transcript(text), Turn.Status.COMPLETE)
    return Finish(end, started.siblings if siblings else None)


async def test_an_answer_the_database_refuses_fails_alone_among_those_ending_with_it(
    django_user_model, refuse_rows
):
    await database_sync_to_async(refuse_rows)("chats_turn", "answer_text", "REFUSE-ME", "UPDATE")
    turns = await database_sync_to_async(started_turns)(django_user_model, 3)
    texts = ["First answer.", "An answer with REFUSE-ME in it.", "Third answer."]
    batches = get_finish_batches()
    outcomes = await asyncio.gather(
        *(batches.submit(finish_of(s, t)) for s, t in zip(turns, texts, strict=True)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Exception)
    for index in (0, 2):
        turn, card = outcomes[index].turn, outcomes[index].card
        assert card is not None and card["type"] == "turn.finished"
        stored = await Turn.objects.aget(pk=turn.pk)
        assert (stored.status, stored.answer_text) == (Turn.Status.COMPLETE, texts[index])
        assert await Reference.objects.filter(turn_id=turn.pk, footnote=1).aexists()
    refused = await Turn.objects.aget(pk=turns[1].turn.pk)
    assert refused.status == Turn.Status.STREAMING  # its run marks it failed
    assert not await Reference.objects.filter(turn_id=refused.pk).aexists()


def test_turns_ending_together_cost_the_queries_of_one(django_user_model):
    one = started_turns(django_user_model, 1, "a")
    ten = started_turns(django_user_model, 10, "b")
    with CaptureQueriesContext(connection) as alone:
        store_finishes([finish_of(s, f"Answer {s.turn.pk} here.") for s in one])
    with CaptureQueriesContext(connection) as together:
        outcomes = store_finishes([finish_of(s, f"Answer {s.turn.pk} here.") for s in ten])
    # The turns' rows are one UPDATE, their chats' another, as for one turn.
    assert len(together.captured_queries) == len(alone.captured_queries)
    for started, stored in zip(ten, outcomes, strict=True):
        turn, card = stored.turn, stored.card
        assert turn.pk == started.turn.pk
        assert turn.answer_text == f"Answer {turn.pk} here."
        assert f"turn-{turn.pk}" in card["html"]
        assert Reference.objects.get(turn=turn, footnote=1).source.headline == turn.answer_text
        chat = Chat.objects.get(pk=turn.chat_id)
        assert chat.updated_at == turn.finished_at


def test_a_turn_finished_already_is_left_as_it_is(django_user_model):
    (started,) = started_turns(django_user_model, 1)
    Turn.objects.filter(pk=started.turn.pk).update(status=Turn.Status.INTERRUPTED)
    assert store_finishes([finish_of(started, "Late answer.")]) == [Stored(None)]
    assert Turn.objects.get(pk=started.turn.pk).answer_text == ""
    assert not Reference.objects.exists()


def test_the_final_card_needs_no_query_for_siblings_the_run_knows(django_user_model):
    known, unknown = started_turns(django_user_model, 2)
    with CaptureQueriesContext(connection) as with_siblings:
        store_finishes([finish_of(known, "Answer one.")])
    with CaptureQueriesContext(connection) as without:
        store_finishes([finish_of(unknown, "Answer two.", siblings=False)])
    assert len(with_siblings.captured_queries) == len(without.captured_queries) - 1


def test_an_answer_with_code_and_lone_carriage_returns_is_stored(django_user_model):
    """An agent may break lines with a bare CR, which the Markdown parser reads as a line break
    too; the code block's lines must be counted as it counts them."""
    (started,) = started_turns(django_user_model, 1)
    text = "Intro\r\r```\rx = 1\r```\rAfter"
    (stored,) = store_finishes([finish_of(started, text)])
    turn, card = stored.turn, stored.card
    assert (turn.answer_text, turn.status) == (text, Turn.Status.COMPLETE)
    assert card is not None and "x = 1" in turn.answer_html
