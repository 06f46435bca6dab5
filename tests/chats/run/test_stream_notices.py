"""Nothing of the agent's stream is lost in silence: what the site skipped is said on the turn.

A line over AGENT_MAX_LINE_BYTES (here the agent's sources), unreadable lines and citations that
cannot be shown each become a sentence stored with the turn, shown live and after a reload.
Against the real site and a stand-in agent on a real loopback port.
"""

from __future__ import annotations

from html import escape

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as PageClient
from django.urls import reverse

from chats.models import Turn
from demo_agent.scripted import Reply
from tests.chats.conftest import events_of, sse
from tests.grounding_bodies import answer_text, references

pytestmark = pytest.mark.django_db(transaction=True)


def body(count: int, *, extra_references=()) -> list:
    """The answer, one GROUNDING event with `count` references, an unreadable line, COMPLETE."""
    grounding = {"type": "GROUNDING", "references": [*references(count), *extra_references]}
    return [
        sse({"type": "ANSWER", "content": answer_text(count)}),
        sse(grounding),
        "data: <html>not json</html>\n\n",
        sse({"type": "COMPLETE", "checkpoint_id": "cp-1", "consumption": []}),
    ]


async def run_turn(connect, user, chat):
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "How did NVIDIA do?"})
    turn_id = (await client.receive_until("turn.started"))[-1]["turn_id"]
    frames = await client.receive_until("turn.finished", turn_id=turn_id, timeout=30)
    return frames, await Turn.objects.aget(pk=turn_id)


@sync_to_async
def page_of(user, chat) -> str:
    page = PageClient()
    page.force_login(user)
    return page.get(reverse("chat_detail", args=[chat.pk])).content.decode()


async def test_sources_over_the_line_cap_are_said_on_the_turn_live_and_after_reload(
    connect, user, chat, upstream, settings
):
    settings.AGENT_MAX_LINE_BYTES = 20_000
    lines = body(200)
    size = len(lines[1])
    assert size > 20_000  # the GROUNDING line is over the cap
    upstream.queue(Reply(body=lines))
    frames, turn = await run_turn(connect, user, chat)

    sources = f"The agent's sources ({size / 1000:.0f} KB) were over AGENT_MAX_LINE_BYTES"
    assert turn.status == Turn.Status.COMPLETE
    assert turn.notices == [
        f"{sources} and are not shown.",
        "1 line of the agent's stream could not be read and was skipped.",
    ]
    live = [e.get("activity", {}).get("text", "") for e in events_of(frames, turn.pk)]
    assert f"{sources} and are not shown." in live
    assert escape(sources) in frames[-1]["html"]  # the finished card
    page = await page_of(user, chat)
    assert escape(f"{sources} and are not shown.") in page


async def test_the_default_cap_keeps_ten_thousand_references(
    connect, user, chat, upstream, settings
):
    settings.AGENT_MAX_ANSWER_CHARS = 1_000_000  # one 60-character sentence per reference
    upstream.queue(Reply(body=body(10_000)))
    _, turn = await run_turn(connect, user, chat)
    assert (turn.status, turn.error) == (Turn.Status.COMPLETE, "")
    assert turn.answer_html.count('class="footnote-item"') == 10_000
    assert not any("AGENT_MAX_LINE_BYTES" in notice for notice in turn.notices)


async def test_citations_that_cannot_be_shown_are_counted_on_the_turn(
    connect, user, chat, upstream
):
    broken = [
        {"start": "0", "end": 10, "source": None},  # a non-integer offset
        {"start": 0, "source": {"type": "BIGDATA", "id": "x", "hd": "X"}},  # no end
        "not an object",
    ]
    upstream.queue(Reply(body=body(3, extra_references=broken)))
    _, turn = await run_turn(connect, user, chat)
    assert turn.status == Turn.Status.COMPLETE
    assert turn.answer_html.count('class="footnote-item"') == 3
    assert "3 of the agent's citations were malformed or did not fit the answer" in (
        " ".join(turn.notices)
    )


async def test_citations_past_where_a_cut_answer_stops_are_said_to_be_so(
    connect, user, chat, upstream, settings
):
    """The agent cited the whole answer before sending it; the site kept only the first half."""
    whole = answer_text(6)
    settings.AGENT_MAX_ANSWER_CHARS = len(whole) // 2
    broken = [{"start": "0", "end": 10, "source": None}]  # malformed wherever the answer stops
    grounding = {"type": "GROUNDING", "references": [*references(6), *broken]}
    upstream.queue(Reply(body=[sse(grounding), sse({"type": "ANSWER", "content": whole})]))
    _, turn = await run_turn(connect, user, chat)
    assert (turn.status, turn.error_kind) == (Turn.Status.INTERRUPTED, Turn.ErrorKind.LIMIT)
    shown = turn.answer_html.count('class="footnote-item"')
    assert 0 < shown < 6
    assert turn.notices == [
        "1 of the agent's citations was malformed or did not fit the answer, and not shown.",
        f"{6 - shown} of the agent's citations point past where this answer stops, and are not"
        " shown.",
    ]
