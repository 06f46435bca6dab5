"""A turn's event stream (text/event-stream) against the real served site, read with httpx-sse's
parser of the server-sent events format: one event each, to its end; cut and resumed with
Last-Event-ID; replayed when finished; counted as a live connection."""

from __future__ import annotations

import json

import httpx
import pytest
from httpx_sse import connect_sse

from chats.models import Turn, TurnEvent
from chats.selectors import turn_events_after
from demo_agent.scripted import Reply, Stall, answer_stream

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"word{n} " for n in range(40)]


def paced_answer(pause: float = 0.02) -> Reply:
    """Forty answer deltas and their plan, one event every `pause` seconds."""
    return Reply.events(*answer_stream("".join(WORDS), pieces=len(WORDS)), pause=pause)


def read(api: httpx.Client, turn_id: int, *, after: str | None = None, stop_after: int = 0):
    """The stream's SSE events, until it ends (or after `stop_after` of them, cutting it)."""
    headers = {"Last-Event-ID": after} if after is not None else {}
    events = []
    with connect_sse(api, "GET", f"/turns/{turn_id}/events", headers=headers) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        for event in source.iter_sse():
            events.append(event)
            if stop_after and len(events) == stop_after:
                break  # the connection is closed with the block
    return events


def carried(events) -> list[dict]:
    """The turn's events the stream carried, in order: one SSE event each, `id:` its seq and
    `event:` its type."""
    found = []
    for event in events:
        if event.event not in ("turn.finished", "turn.notice"):
            view = json.loads(event.data)
            assert (event.id, event.event) == (str(view["seq"]), view["type"])
            found.append(view)
    return found


def test_the_stream_is_each_event_as_the_page_gets_it_then_turn_finished(api, upstream):
    upstream.queue(paced_answer())
    chat = api.post("/chats", json={}).json()["id"]
    turn = api.post(f"/chats/{chat}/turns", json={"question": "q"}).json()
    assert turn["status"] == "streaming"

    events = read(api, turn["id"])  # returns once the server ends the stream
    *relayed, finished = events
    assert finished.event == "turn.finished"
    card = json.loads(finished.data)
    assert card["type"] == "turn.finished" and card["status"] == "complete" and card["html"]
    logged = list(TurnEvent.objects.filter(turn_id=turn["id"]).order_by("seq"))
    assert len(logged) > 40
    # One SSE event per logged event, each once, in order: `id:` its seq, `event:` its type,
    # `data:` what the page gets for it.
    assert [(int(e.id), e.event) for e in relayed] == [(row.seq, row.type) for row in logged]
    views = carried(relayed)
    assert views == turn_events_after(turn_id=turn["id"], after_seq=0)
    assert "".join(v.get("content", "") for v in views) == "".join(WORDS)
    # A finished turn replays its events and ends; from Last-Event-ID, exactly those after it.
    replayed = read(api, turn["id"])
    assert [(e.id, e.event, e.data) for e in replayed] == [(e.id, e.event, e.data) for e in events]
    after = read(api, turn["id"], after=relayed[6].id)
    assert [e.data for e in after] == [e.data for e in events[7:]]


def test_a_stream_cut_after_its_fifth_event_resumes_after_it_once_in_order(api, upstream):
    upstream.queue(paced_answer(pause=0.05))
    chat = api.post("/chats", json={}).json()["id"]
    turn_id = api.post(f"/chats/{chat}/turns", json={"question": "q"}).json()["id"]

    first = read(api, turn_id, stop_after=5)
    assert Turn.objects.get(pk=turn_id).status == "streaming"  # cut while it streams
    rest = read(api, turn_id, after=first[-1].id)

    assert rest[-1].event == "turn.finished"
    seqs = [view["seq"] for view in carried(first) + carried(rest)]
    logged = list(TurnEvent.objects.filter(turn_id=turn_id).values_list("seq", flat=True))
    assert seqs == sorted(logged) == list(range(1, len(logged) + 1))  # each once, in order
    assert len(logged) > 10 and first[-1].id == "5" and carried(rest)[0]["seq"] == 6


def test_a_stream_counts_as_one_of_the_users_live_connections(api, upstream, settings, user):
    settings.WS_MAX_SOCKETS_PER_USER = 1
    upstream.respond = lambda request: Reply(body=[Stall()])
    chat = api.post("/chats", json={}).json()["id"]
    turn_id = api.post(f"/chats/{chat}/turns", json={"question": "q"}).json()["id"]
    with connect_sse(api, "GET", f"/turns/{turn_id}/events") as open_stream:
        assert open_stream.response.status_code == 200
        refused = api.get(f"/turns/{turn_id}/events")
        assert refused.status_code == 429 and "live connections" in refused.json()["detail"]
    api.post(f"/turns/{turn_id}/stop")


def test_asking_with_stream_answers_with_the_turns_events(api, upstream):
    upstream.queue(paced_answer())
    chat = api.post("/chats", json={}).json()["id"]
    with connect_sse(api, "POST", f"/chats/{chat}/turns?stream=true", json={"question": "q"}) as s:
        assert s.response.status_code == 200
        events = list(s.iter_sse())
    assert events[-1].event == "turn.finished"
    turn_id = json.loads(events[-1].data)["turn_id"]
    # As GET .../events gives it: one SSE event per event, each once, in order, then the end.
    assert carried(events[:-1]) == turn_events_after(turn_id=turn_id, after_seq=0)
    assert [int(e.id) for e in events[:-1]] == list(range(1, len(events)))
    assert Turn.objects.get(pk=turn_id).status == "complete"
