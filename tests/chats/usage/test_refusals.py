"""With USAGE_MONTHLY_LIMIT_TOKENS just above one answer's usage, the second question gets the
limit message before any call reaches the agent, whichever way it starts: a page's ask, Re-run, a
watch (which is paused, saying why), a workflow. A per-user override lifts it for that user."""

from __future__ import annotations

from datetime import time
from http import HTTPStatus

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.test import AsyncClient
from django.test import Client as HttpClient
from django.urls import reverse

from chats.agent.providers.bigdata import event_from_message
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn, UsageLimit, Watch, WatchRun
from chats.run.finishes import finish_turn
from chats.services import turn_start
from chats.usage.limits import resets_on
from chats.watch.tasks import watch_create
from demo_agent.scripted import Reply, answer_stream
from tests.chats.live.test_protocol import assert_server_frame

pytestmark = pytest.mark.django_db(transaction=True)

USED = 1_000  # what one answer uses: 900 in, 100 out
REFUSED = (
    f"You have used 1,000 of your 1,001 tokens this month and a question uses about 1,000, so"
    f" this one would pass the limit; the limit resets on {resets_on()}."
)


def answer(text: str = "An answer.") -> list[dict]:
    messages = answer_stream(text)
    messages[-1] = {
        **messages[-1],
        "consumption": [{"type": "base", "input_tokens": 900, "output_tokens": 100}],
    }
    return messages


@pytest.fixture
def limited(settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = USED + 1


async def ask_and_finish(client, frame: dict) -> int:
    await client.send(frame)
    started = (await client.receive_until("turn.started"))[-1]
    finished = await client.receive_until("turn.finished", turn_id=started["turn_id"])
    assert finished[-1]["status"] == "complete"
    return started["turn_id"]


async def refused(client, frame: dict) -> None:
    await client.send(frame)
    error = await client.receive()
    assert_server_frame(error)
    assert error == {"type": "error", "code": "usage_limit", "message": REFUSED}


ASK = {"type": "ask", "message": "How did NVIDIA do?", "research_effort": "standard"}


async def test_a_pages_second_question_and_a_rerun_are_refused_before_the_agent_is_called(
    connect, user, chat, upstream, limited
):
    upstream.queue(Reply.events(*answer()))
    client = await connect(user, chat)
    first = await ask_and_finish(client, ASK)
    assert len(upstream.requests) == 1

    await refused(client, {**ASK, "message": "And AMD?"})
    await refused(client, {"type": "rerun", "turn_id": first})
    other = await database_sync_to_async(Chat.objects.create)(owner=user)
    await refused(await connect(user, other), ASK)  # the limit is the user's, not the chat's

    assert len(upstream.requests) == 1  # nothing more reached the agent
    assert await Turn.objects.filter(chat__owner=user).acount() == 1


async def test_a_running_answer_finishes_and_is_counted(connect, user, chat, upstream, limited):
    """A limit reached while an answer is written does not cut it short: it is counted."""
    upstream.queue(Reply.events(*answer(), pause=0.05))
    client = await connect(user, chat)
    turn_id = await ask_and_finish(client, ASK)
    turn = await Turn.objects.aget(pk=turn_id)
    assert turn.status == Turn.Status.COMPLETE
    assert await turn.usage.acount() == 1


def finished_turn(chat: Chat) -> Turn:
    """A finished answer that used USED tokens, stored as a run stores it."""
    started = turn_start(chat=chat, question="How did NVIDIA do?", research_effort="standard")
    transcript = Transcript.from_events(event_from_message(m) for m in answer())
    return finish_turn(turn_id=started.turn.pk, transcript=transcript, status=Turn.Status.COMPLETE)


def test_a_watch_refused_for_the_limit_is_paused_saying_why(user, chat, upstream, limited):
    turn = finished_turn(chat)
    watch = watch_create(owner=user, turn=turn, every="day", time_of_day=time(9, 0))
    call_command("run_watches", "--all")
    assert upstream.requests == []
    run = WatchRun.objects.get()
    assert (run.state, run.error) == (WatchRun.State.SKIPPED, REFUSED)
    watch.refresh_from_db()
    assert (watch.state, watch.paused_reason) == (Watch.State.PAUSED, REFUSED)

    browser = HttpClient()
    browser.force_login(user)
    changes = browser.get(reverse("watch_changes")).content.decode()
    assert f"Paused: {REFUSED} Resume it to run it again." in changes
    call_command("run_watches", "--all")  # a paused watch is not run
    assert WatchRun.objects.count() == 1
    browser.post(reverse("watch_resume", args=[watch.pk]))
    watch.refresh_from_db()
    assert (watch.state, watch.paused_reason) == (Watch.State.ACTIVE, "")


async def test_a_workflow_is_refused_before_the_agent_is_called(user, upstream, settings, limited):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-risk"]
    settings.WORKFLOW_URL = f"{upstream.url}/v1/workflow/execute"
    await database_sync_to_async(finished_turn)(
        await Chat.objects.acreate(owner=user, title="Earlier")
    )
    web = AsyncClient()
    await web.aforce_login(user)
    response = await web.post(
        reverse("workflow_run"),
        {"workflow": "id:tmpl-risk", "inputs_json": '{"company": "NVIDIA"}'},
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert REFUSED in response.content.decode()
    assert upstream.requests == []
    assert await Chat.objects.filter(owner=user).acount() == 1  # no chat for the refused run


async def test_a_users_own_override_lifts_the_limit_for_that_user_alone(
    connect, user, other_user, chat, upstream, limited
):
    for owner in (user, other_user):
        await database_sync_to_async(finished_turn)(await Chat.objects.acreate(owner=owner))
    await UsageLimit.objects.acreate(user=user, monthly_tokens=None, note="lifted")
    upstream.queue(Reply.events(*answer()))
    await ask_and_finish(await connect(user, chat), ASK)
    theirs = await Chat.objects.acreate(owner=other_user)
    await refused(await connect(other_user, theirs), ASK)
    assert len(upstream.requests) == 1
