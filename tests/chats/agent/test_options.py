"""Question options: the ask frame's checks, the request body each option sends, the 403 wording."""

from __future__ import annotations

import pytest

from chats.agent.options import OptionsError, QuestionOptions, check_output_schema
from chats.errors import FrameError
from chats.live.protocol import Ask, parse_client_frame
from chats.models import Chat, OutputSchema, Turn
from demo_agent.scripted import Reply, answer_stream


def ask_frame(**options):
    return {"type": "ask", "message": "How did NVIDIA do?", "options": options}


# --- parse_client_frame -------------------------------------------------------------------------


def test_an_ask_without_options_leaves_them_to_the_chat():
    frame = parse_client_frame({"type": "ask", "message": "Hi"})
    assert isinstance(frame, Ask) and frame.options is None


def test_every_option_is_parsed():
    frame = parse_client_frame(
        ask_frame(
            model="pro",
            period_start="2026-01-01",
            period_end="2026-06-30",
            entities_all_of=["NVIDIA"],
            entities_any_of=["AMD", " Intel "],
            entities_none_of=["Apple"],
            sources=["Reuters"],
            tags=["earnings"],
            freshness_boost=7,
            expected_output="bullet points",
            charts=True,
            schema_id=3,
        )
    )
    assert frame.options == QuestionOptions(
        model="pro",
        period_start="2026-01-01",
        period_end="2026-06-30",
        entities_all_of=("NVIDIA",),
        entities_any_of=("AMD", "Intel"),
        entities_none_of=("Apple",),
        sources=("Reuters",),
        tags=("earnings",),
        freshness_boost=7,
        expected_output="bullet points",
        charts=True,
        schema_id=3,
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"model": "ultra"}, "Model must be 'base' or 'pro'"),
        ({"period_start": "2026-13-01"}, "From must be a date"),
        ({"period_end": "yesterday"}, "To must be a date"),
        ({"period_start": "2026-05-02", "period_end": "2026-05-01"}, "From date must not be after"),
        ({"entities_any_of": "NVIDIA"}, "must be a list"),
        ({"entities_all_of": [""]}, "Each of entities all of"),
        ({"tags": ["x"] * 21}, "at most 20"),
        ({"sources": [7]}, "Each of sources"),
        ({"freshness_boost": 0}, "from 1 to 10"),
        ({"freshness_boost": 11}, "from 1 to 10"),
        ({"freshness_boost": True}, "from 1 to 10"),
        ({"expected_output": "x" * 2001}, "at most 2000"),
        ({"expected_output": "a\x00b"}, "cannot be sent"),
        ({"charts": "yes"}, "Charts must be true or false"),
        ({"schema_id": "3"}, "schema_id must be"),
        ({"temperature": 1}, "Unknown option: temperature"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(options, expected):
    with pytest.raises(FrameError, match=expected):
        parse_client_frame(ask_frame(**options))


def test_options_must_be_an_object():
    with pytest.raises(FrameError, match="options must be an object"):
        parse_client_frame({"type": "ask", "message": "Hi", "options": ["pro"]})


def test_stored_options_that_no_longer_pass_are_dropped():
    assert QuestionOptions.from_stored({"model": "ultra"}) == QuestionOptions()
    assert QuestionOptions.from_stored({"model": "pro"}).to_json() == {"model": "pro"}


# --- Schemas --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"revenue": {"type": "string"}}},
        {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "number"}}}},
    ],
)
def test_object_and_list_of_objects_schemas_pass(schema):
    check_output_schema(schema)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "top level must be an object"),
        ({"type": "array", "items": {"type": "string"}}, "top level must be an object"),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema"),
        ([{"type": "object"}], "must be a JSON object"),
    ],
)
def test_other_schemas_are_refused(schema, expected):
    with pytest.raises(OptionsError, match=expected):
        check_output_schema(schema)


# --- What reaches the agent -------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


async def ask_and_finish(client, **frame_extra) -> dict:
    await client.send(
        {"type": "ask", "message": "How did NVIDIA do?", "research_effort": "lite", **frame_extra}
    )
    started = (await client.receive_until("turn.started"))[-1]
    finished = (await client.receive_until("turn.finished", turn_id=started["turn_id"]))[-1]
    return finished


@pytestmark_db
async def test_no_options_send_no_option_fields(connect, chat, user, upstream):
    upstream.queue(Reply.events(*answer_stream("Fine.")))
    client = await connect(user, chat)
    await ask_and_finish(client)
    assert set(upstream.payloads[0]) == {"message", "research_effort", "persistence_mode"}


@pytestmark_db
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"model": "pro"}, {"model_name": "pro"}),
        ({"model": "base"}, {"model_name": "base"}),
        ({"expected_output": "bullet points"}, {"expected_output": "bullet points"}),
        (
            {"period_start": "2026-01-01", "period_end": "2026-03-31"},
            {
                "tools_configs": {
                    "search": {
                        "query_filters": {"period": {"start": "2026-01-01", "end": "2026-03-31"}}
                    }
                }
            },
        ),
        (
            {"period_end": "2026-03-31"},
            {"tools_configs": {"search": {"query_filters": {"period": {"end": "2026-03-31"}}}}},
        ),
        (
            {"entities_all_of": ["NVIDIA"], "entities_none_of": ["Apple", "Tesla"]},
            {
                "tools_configs": {
                    "search": {
                        "query_filters": {
                            "entities": {"all_of": ["NVIDIA"], "none_of": ["Apple", "Tesla"]}
                        }
                    }
                }
            },
        ),
        (
            {"entities_any_of": ["AMD"]},
            {"tools_configs": {"search": {"query_filters": {"entities": {"any_of": ["AMD"]}}}}},
        ),
        (
            {"sources": ["Reuters"], "tags": ["earnings"]},
            {
                "tools_configs": {
                    "search": {
                        "query_filters": {
                            "content": {"sources": {"any_of": ["Reuters"]}},
                            "tags": {"any_of": ["earnings"]},
                        }
                    }
                }
            },
        ),
        (
            {"freshness_boost": 8},
            {"tools_configs": {"search": {"ranking_parameters": {"freshness_boost": 8}}}},
        ),
        (
            {"charts": True},
            {
                "tools_configs": {
                    "python_code_execution": {"enabled": True, "chart_generation_enabled": True}
                }
            },
        ),
        ({"charts": False, "model": ""}, {}),
    ],
)
async def test_each_option_is_sent_as_documented(connect, chat, user, upstream, options, expected):
    upstream.queue(Reply.events(*answer_stream("Fine.")))
    client = await connect(user, chat)
    await ask_and_finish(client, options=options)
    payload = upstream.payloads[0]
    assert {
        k: v
        for k, v in payload.items()
        if k not in ("message", "research_effort", "persistence_mode")
    } == expected


@pytestmark_db
async def test_a_saved_schema_is_sent_and_options_are_remembered(connect, chat, user, upstream):
    schema = {"type": "object", "properties": {"revenue": {"type": "string"}}}
    saved = await OutputSchema.objects.acreate(owner=user, name="Revenue", schema=schema)
    upstream.queue(Reply.events(*answer_stream("One.")), Reply.events(*answer_stream("Two.")))
    client = await connect(user, chat)
    await ask_and_finish(client, options={"schema_id": saved.pk, "model": "pro"})
    assert upstream.payloads[0]["structured_output_schema"] == schema
    stored = await Chat.objects.aget(pk=chat.pk)
    assert stored.options == {"schema_id": saved.pk, "model": "pro"}
    # A follow-up without options uses the chat's.
    await ask_and_finish(client)
    assert upstream.payloads[1]["model_name"] == "pro"
    assert upstream.payloads[1]["structured_output_schema"] == schema


@pytestmark_db
async def test_another_users_schema_is_refused(connect, chat, user, other_user, upstream):
    theirs = await OutputSchema.objects.acreate(
        owner=other_user, name="X", schema={"type": "object"}
    )
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "Hi", "options": {"schema_id": theirs.pk}})
    frame = (await client.receive_until("error"))[-1]
    assert "no longer exists" in frame["message"]
    assert upstream.payloads == []


@pytestmark_db
@pytest.mark.parametrize(
    ("options", "detail", "expected"),
    [
        ({"model": "pro"}, "Not entitled", "Your API key is not entitled to the pro model."),
        ({"charts": True}, "Forbidden", "Your API key is not entitled to charts."),
        (
            {"charts": True, "model": "pro"},
            "python_code_execution is not enabled for this key",
            "Your API key is not entitled to charts.",
        ),
        (
            {"charts": True, "model": "pro"},
            "model tier pro requires an upgrade",
            "Your API key is not entitled to the pro model.",
        ),
    ],
)
async def test_a_403_names_the_option(connect, chat, user, upstream, options, detail, expected):
    upstream.queue(Reply.error(403, detail))
    client = await connect(user, chat)
    finished = await ask_and_finish(client, options=options)
    turn = await Turn.objects.aget(pk=finished["turn_id"])
    assert turn.status == Turn.Status.FAILED
    assert turn.error == expected
