"""Workflows: the list, the run form, a run end to end against the demo agent, resuming a
dropped stream with its execution_id, errors in plain words; a run is asked as a question is
(the same batch, limit, refusal and session check)."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

import pytest
from channels.db import database_sync_to_async
from django.contrib.sessions.backends.db import SessionStore
from django.test import AsyncClient
from django.urls import reverse

from chats.errors import ErrorCode, TurnStartError
from chats.models import Chat, Turn, WorkflowTemplate
from chats.pages.workflows import placeholders, workflow_ask
from chats.run.asks import SessionCheck, ask_start
from chats.services import TurnAsk, turn_start
from demo_agent import DemoAgentApp
from demo_agent.scripted import Drop, Reply, Stall, answer_stream
from tests.servers import serve_asgi
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def delta(message: dict, execution_id: str = "exec-1", request_id: str = "req-1") -> bytes:
    document = {"request_id": request_id, "execution_id": execution_id, "delta": message}
    return b"data: " + json.dumps(document).encode() + b"\n\n"


async def run_form(client: AsyncClient, **form) -> object:
    return await client.post(reverse("workflow_run"), form)


async def finished_turn(chat_id: int, timeout: float = 30) -> Turn:
    async def finished() -> Turn | None:
        turn = await Turn.objects.filter(chat_id=chat_id).afirst()
        return turn if turn is not None and turn.is_finished else None

    await wait_until(finished, timeout)
    return await finished()


@pytest.fixture
async def web(user):
    client = AsyncClient()
    await client.aforce_login(user)
    return client


@pytest.fixture
def demo_templates(settings):
    """The demo agent's built-in templates, offered as researchsite/settings.py offers them."""
    from demo_agent.workflows import BUILTIN_TEMPLATES

    settings.WORKFLOW_BUILTIN_TEMPLATES = {
        tid: {"name": template.name, "inputs": list(template.inputs)}
        for tid, template in BUILTIN_TEMPLATES.items()
    }


# --- Templates and the request --------------------------------------------------------------


def test_placeholders_are_found_in_every_string_of_a_template():
    template = {"prompt": "Risks for {{company}} in {{ year }}", "steps": [{"q": "{{company}}"}]}
    assert placeholders(template) == ("company", "year")


def test_the_list_shows_configured_saved_and_built_in_templates(client, user, other_user, settings):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-earnings-42"]
    settings.WORKFLOW_BUILTIN_TEMPLATES = {
        "demo.earnings_brief": {"name": "Earnings brief", "inputs": ["company"]}
    }
    WorkflowTemplate.objects.create(owner=user, name="My scan", template={"prompt": "{{ticker}}"})
    WorkflowTemplate.objects.create(owner=other_user, name="Not mine", template={"prompt": "x"})
    client.force_login(user)
    html = client.get(reverse("workflow_list")).content.decode()
    for shown in ("tmpl-earnings-42", "My scan", 'name="input_ticker"', "Earnings brief"):
        assert shown in html
    assert "Not mine" not in html
    assert "last_24_hours" in html and "last_365_days" in html


def test_saving_a_template_needs_a_json_object(client, user):
    client.force_login(user)
    response = client.post(reverse("workflow_save"), {"name": "X", "template": "[1]"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    response = client.post(reverse("workflow_save"), {"name": "X", "template": '{"prompt": "a"}'})
    assert response.status_code == HTTPStatus.FOUND
    assert WorkflowTemplate.objects.get(owner=user).template == {"prompt": "a"}


# --- Runs -------------------------------------------------------------------------------------


async def test_a_demo_workflow_runs_end_to_end(web, user, settings, demo_templates):
    settings.WORKFLOW_URL = ""
    settings.AGENT_MAX_RETRIES = 0
    settings.EVENT_FLUSH_INTERVAL = 0.01
    with serve_asgi(DemoAgentApp("secret", pace=0)) as url:
        settings.RESEARCH_AGENT_URL = f"{url}/v1/research-agent"
        response = await run_form(
            web,
            workflow="builtin:demo.earnings_brief",
            input_company="NVIDIA",
            time_range="last_365_days",
            model="pro",
        )
        assert response.status_code == HTTPStatus.FOUND
        chat = await Chat.objects.aget(owner=user)
        assert response["Location"] == reverse("chat_detail", args=[chat.pk])
        turn = await finished_turn(chat.pk)
    assert turn.status == Turn.Status.COMPLETE, turn.error
    assert "NVIDIA" in turn.answer_text and "\n- " in turn.answer_text  # bullet points
    assert "pro model" in turn.answer_text
    assert turn.execution_id.startswith("exec-")
    assert turn.workflow == {
        "template": "demo.earnings_brief",
        "input": {"company": "NVIDIA"},
        "model_name": "pro",
        "time_range": "last_365_days",
    }


async def test_missing_inputs_are_refused_before_anything_is_sent(
    web, user, upstream, demo_templates
):
    response = await run_form(web, workflow="builtin:demo.risk_scan", input_company="  ")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "Fill in: company" in response.content.decode()
    assert upstream.payloads == [] and not await Chat.objects.filter(owner=user).aexists()


async def test_free_form_inputs_obey_the_question_limit(web, user, settings, upstream):
    """A configured template takes any inputs: together they are a question, sent and stored."""
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    inputs = {f"field_{n}": "x" * 400 for n in range(settings.MESSAGE_MAX_CHARS // 400 + 1)}
    response = await run_form(web, workflow="id:tmpl-1", inputs_json=json.dumps(inputs))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "Inputs are limited to 8000 characters in all" in response.content.decode()
    assert upstream.payloads == [] and not await Chat.objects.filter(owner=user).aexists()


@pytest.mark.parametrize(
    ("inputs_json", "expected"),
    [
        ("[" * 3000 + "]" * 3000, "Inputs must be a JSON object of texts."),
        ('{"company": "NUL \\u0000 here"}', "characters that cannot be sent"),
    ],
)
async def test_unusable_free_form_inputs_are_refused_clearly(
    web, user, settings, upstream, inputs_json, expected
):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    response = await run_form(web, workflow="id:tmpl-1", inputs_json=inputs_json)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert expected in response.content.decode()
    assert upstream.payloads == [] and not await Chat.objects.filter(owner=user).aexists()


async def test_a_dropped_stream_resumes_with_its_execution_id(web, user, settings, upstream):
    """The agent replays the execution from its start; nothing is shown twice."""
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    events = answer_stream("Revenue rose. Margins held.", pieces=4)
    first = [delta(events[0]), delta(events[1]), delta(events[2]), Drop()]
    upstream.queue(
        Reply(body=first),
        Reply(body=[delta(e, request_id="req-2") for e in events]),
    )
    response = await run_form(
        web, workflow="id:tmpl-1", inputs_json='{"company": "NVIDIA"}', time_range="last_7_days"
    )
    assert response.status_code == HTTPStatus.FOUND
    chat = await Chat.objects.aget(owner=user)
    turn = await finished_turn(chat.pk)
    assert turn.status == Turn.Status.COMPLETE, turn.error
    assert turn.answer_text == "Revenue rose. Margins held."
    assert [r.path for r in upstream.requests] == ["/v1/workflow/execute"] * 2
    assert upstream.payloads[0] == {
        "template": "tmpl-1",
        "input": {"company": "NVIDIA"},
        "time_range": "last_7_days",
    }
    assert upstream.payloads[1] == {**upstream.payloads[0], "execution_id": "exec-1"}
    assert turn.execution_id == "exec-1"
    assert await turn.events.acount() == len(events)


async def test_a_resume_that_goes_on_from_where_it_was_is_kept_whole(web, user, settings, upstream):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    events = answer_stream("Revenue rose. Margins held.", pieces=4)
    upstream.queue(
        Reply(body=[delta(events[0]), delta(events[1]), Drop()]),
        Reply(body=[delta(e) for e in events[2:]]),
    )
    await run_form(web, workflow="id:tmpl-1")
    turn = await finished_turn((await Chat.objects.aget(owner=user)).pk)
    assert turn.status == Turn.Status.COMPLETE, turn.error
    assert turn.answer_text == "Revenue rose. Margins held."


async def test_a_stall_resumes_too(web, user, settings, upstream):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    settings.AGENT_IDLE_TIMEOUT = 2.0
    events = answer_stream("Fine.", pieces=1)
    upstream.queue(
        Reply(body=[delta(events[0]), Stall()]),
        Reply(body=[delta(e) for e in events]),
    )
    await run_form(web, workflow="id:tmpl-1")
    turn = await finished_turn((await Chat.objects.aget(owner=user)).pk)
    assert turn.status == Turn.Status.COMPLETE, turn.error
    assert upstream.payloads[1]["execution_id"] == "exec-1"


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        (409, "persistence mismatch", "persistence mismatch"),
        (404, "Template not found", "Template not found"),
        (403, "Not entitled", "Your API key is not entitled to the pro model."),
    ],
)
async def test_errors_become_clear_turn_messages(
    web, user, settings, upstream, status, detail, expected
):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    upstream.queue(Reply.error(status, detail))
    await run_form(web, workflow="id:tmpl-1", model="pro")
    turn = await finished_turn((await Chat.objects.aget(owner=user)).pk)
    assert turn.status == Turn.Status.FAILED
    assert expected in turn.error


async def test_a_409_on_resume_says_to_run_it_again(web, user, settings, upstream):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    events = answer_stream("Fine.", pieces=2)
    upstream.queue(Reply(body=[delta(events[0]), Drop()]), Reply.error(409, "persistence mismatch"))
    await run_form(web, workflow="id:tmpl-1")
    turn = await finished_turn((await Chat.objects.aget(owner=user)).pk)
    assert turn.status == Turn.Status.FAILED
    assert "Run the workflow again" in turn.error


# --- A run is asked as a question is --------------------------------------------------------


async def test_a_workflow_is_refused_at_the_turn_limit_as_a_question_is(
    web, user, settings, upstream
):
    settings.AGENT_MAX_CONCURRENT_TURNS = 1
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    busy, other = await Chat.objects.acreate(owner=user), await Chat.objects.acreate(owner=user)
    await database_sync_to_async(turn_start)(chat=busy, question="Running", research_effort="lite")
    with pytest.raises(TurnStartError) as question:
        await ask_start(TurnAsk(chat=other, question="Q", research_effort="lite"), lambda: True)
    ask = await database_sync_to_async(workflow_ask)(user=user, form={"workflow": "id:tmpl-1"})
    with pytest.raises(TurnStartError) as workflow:
        await ask_start(ask, lambda: True)
    assert workflow.value.code == question.value.code == ErrorCode.TOO_MANY_TURNS
    assert str(workflow.value) == str(question.value)

    response = await run_form(web, workflow="id:tmpl-1")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert str(question.value) in response.content.decode()
    assert await Chat.objects.filter(owner=user).acount() == 2  # no chat made for the run
    assert upstream.payloads == []


async def test_workflows_and_questions_asked_together_start_in_one_batch(user, settings, upstream):
    """One transaction (one `created_at`) and one count of the owner's limit for all of them."""
    settings.AGENT_MAX_CONCURRENT_TURNS = 3
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    chats = [await Chat.objects.acreate(owner=user) for _ in range(2)]
    form = {"workflow": "id:tmpl-1", "inputs_json": '{"company": "NVIDIA"}'}
    workflows = [await database_sync_to_async(workflow_ask)(user=user, form=form) for _ in range(2)]
    questions = [TurnAsk(chat=c, question="Q", research_effort="lite") for c in chats]
    asks = [questions[0], workflows[0], questions[1], workflows[1]]
    outcomes = await asyncio.gather(
        *(ask_start(ask, lambda: True) for ask in asks), return_exceptions=True
    )
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    assert [o.code for o in outcomes if isinstance(o, BaseException)] == [ErrorCode.TOO_MANY_TURNS]
    turns = [await Turn.objects.select_related("chat").aget(pk=s.turn.turn.pk) for s in started]
    assert len({turn.created_at for turn in turns}) == 1
    (run,) = [turn for turn in turns if turn.workflow]
    assert (run.chat.owner_id, run.chat.provider, run.chat.title) == (
        user.pk,
        "bigdata",
        "Workflow “tmpl-1” (company: NVIDIA)",
    )
    assert run.chat.active_turn_id == run.pk
    assert await Chat.objects.filter(owner=user).acount() == 3  # the refused run made no chat
    for turn in turns:
        await finished_turn(turn.chat_id)


async def test_a_workflow_asked_as_its_session_ends_starts_nothing(web, user, settings, upstream):
    settings.WORKFLOW_TEMPLATE_IDS = ["tmpl-1"]
    session = SessionStore(session_key=web.cookies[settings.SESSION_COOKIE_NAME].value)
    ask = await database_sync_to_async(workflow_ask)(user=user, form={"workflow": "id:tmpl-1"})
    await database_sync_to_async(session.delete)()  # signed out in another tab
    assert await ask_start(ask, SessionCheck(session)) is None
    assert not await Chat.objects.filter(owner=user).aexists()
    assert upstream.payloads == []
