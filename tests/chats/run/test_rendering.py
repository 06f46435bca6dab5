"""A finished answer is rendered in one place, once, off the event loop; a chart as it arrives."""

from __future__ import annotations

import pytest

from chats.models import Turn
from chats.run import rendering
from demo_agent.scripted import Reply, cited_answer_stream

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_runs_finish_renders_its_answer_once(connect, user, chat, upstream, monkeypatch):
    """The run renders the answer on its thread; storing and announcing it renders nothing."""
    rendered: list[tuple[str, str]] = []

    def counted(cited, *, doc_id: str) -> str:
        html = render_html(cited, doc_id=doc_id)
        rendered.append((doc_id, html))
        return html

    render_html = rendering.render_html
    monkeypatch.setattr(rendering, "render_html", counted)
    upstream.queue(Reply.events(*cited_answer_stream([("Revenue rose 12%.", "Reuters")])))
    client = await connect(user, chat)

    await client.send({"type": "ask", "message": "How did revenue do?"})
    started = (await client.receive_until("turn.started"))[-1]
    finished = await client.receive_until("turn.finished", turn_id=started["turn_id"])

    assert finished[-1]["status"] == "complete"
    turn = await Turn.objects.aget(pk=started["turn_id"])
    assert rendered == [(f"t{turn.pk}", turn.answer_html)]
    assert "Reuters" in turn.answer_html
