"""The Workflows wire: the request body, the endpoint beside the research agent, the `delta`
envelope's execution_id, and a run resumed with it (its runs end to end:
tests/chats/pages/test_workflows.py)."""

from __future__ import annotations

import json

import pytest

from chats.agent import AgentError
from chats.agent.events import AnswerEvent, CompleteEvent
from chats.agent.providers import bigdata_settings, open_stream, workflow_url
from chats.agent.providers.bigdata import event_from_message
from chats.agent.providers.workflows import WorkflowAdapter, WorkflowStream, workflow_body
from chats.agent.request import AgentRequest, Workflow
from chats.agent.sse import parse_sse_text
from demo_agent.scripted import Drop, Reply, answer_stream


def delta(message: dict, execution_id: str = "exec-1") -> bytes:
    document = {"request_id": "req-1", "execution_id": execution_id, "delta": message}
    return b"data: " + json.dumps(document).encode() + b"\n\n"


def test_the_body_sends_only_what_is_set():
    assert workflow_body(Workflow(template="t1")) == {"template": "t1"}
    full = Workflow(
        template={"prompt": "x"},
        input={"company": "NVIDIA"},
        model_name="pro",
        time_range="last_30_days",
    )
    assert list(workflow_body(full, "exec-9").items()) == [
        ("template", {"prompt": "x"}),
        ("input", {"company": "NVIDIA"}),
        ("model_name", "pro"),
        ("time_range", "last_30_days"),
        ("execution_id", "exec-9"),
    ]


def test_the_workflow_url_sits_next_to_the_research_agent(settings):
    settings.WORKFLOW_URL = ""
    settings.RESEARCH_AGENT_URL = "https://agents.bigdata.com/v1/research-agent"
    assert workflow_url() == "https://agents.bigdata.com/v1/workflow/execute"
    settings.RESEARCH_AGENT_URL = f"http://127.0.0.1:8000{settings.DEMO_AGENT_PATH}"
    assert workflow_url() == f"http://127.0.0.1:8000{settings.DEMO_WORKFLOW_PATH}"
    settings.RESEARCH_AGENT_URL = "https://proxy.example/bigdata/v1/research-agent/?x=1"
    assert workflow_url() == "https://proxy.example/bigdata/v1/workflow/execute"
    settings.WORKFLOW_URL = "https://elsewhere.example/wf"
    assert workflow_url() == "https://elsewhere.example/wf"


def test_the_adapter_keeps_the_execution_id_and_reads_the_events():
    adapter = WorkflowAdapter()
    body = b"".join(delta(e, "exec-7") for e in answer_stream("Fine.", pieces=1)).decode()
    events, malformed = parse_sse_text(body, adapter)
    assert (malformed, adapter.execution_id) == (0, "exec-7")
    assert isinstance(events[-1], CompleteEvent)
    assert "".join(e.content for e in events if isinstance(e, AnswerEvent)) == "Fine."


def test_a_research_agent_request_with_a_workflow_opens_the_workflows_stream(settings):
    request = AgentRequest(message="Workflow “t”", workflow=Workflow(template="t"))
    assert isinstance(open_stream("bigdata", request), WorkflowStream)
    with pytest.raises(ValueError):
        WorkflowStream(AgentRequest(message="Q"), bigdata_settings())


async def test_a_dropped_stream_resumes_and_names_its_run(settings, upstream):
    settings.WORKFLOW_URL = ""
    events = answer_stream("Revenue rose. Margins held.", pieces=4)
    upstream.queue(
        Reply(body=[delta(events[0]), delta(events[1]), Drop()]),
        Reply(body=[delta(e) for e in events]),  # replayed from its start
    )
    notices = []

    async def on_retry(message: str, delay: float) -> None:
        notices.append((message, delay))

    request = AgentRequest(message="Workflow “t”", workflow=Workflow(template="t"))
    stream = open_stream("bigdata", request, on_retry=on_retry)
    received = [event async for event in stream.events()]
    # Each event once, in order: what the replay repeated is skipped.
    assert [e.data for e in received] == [event_from_message(m).data for m in events]
    assert stream.execution_id == "exec-1"
    assert notices == [("The workflow's stream was cut off.", 0)]
    assert upstream.payloads[1] == {"template": "t", "execution_id": "exec-1"}


async def test_a_404_on_resume_says_the_run_is_gone(settings, upstream):
    settings.WORKFLOW_URL = ""
    events = answer_stream("Fine.", pieces=2)
    upstream.queue(Reply(body=[delta(events[0]), Drop()]), Reply.error(404, "no such execution"))
    request = AgentRequest(message="Workflow “t”", workflow=Workflow(template="t"))
    stream = open_stream("bigdata", request)
    with pytest.raises(AgentError) as gone:
        async for _ in stream.events():
            pass
    assert gone.value.kind == "cannot_continue"
    assert "no longer available to resume" in gone.value.user_message
