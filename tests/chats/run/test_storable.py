"""Whatever the agent sends becomes JSON every backend stores, and the caller is told."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chats.agent.events import AnswerEvent, StructuredOutputEvent, ThinkingEvent
from chats.run.storable import (
    MAX_DEPTH,
    REPLACEMENT,
    UnstorableValue,
    storable_event,
    storable_json,
    storable_message,
    storable_text,
)


def nested(depth: int, leaf=None):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def assert_storable_everywhere(value) -> None:
    """What PostgreSQL, SQLite and msgpack (the Redis layer) need of a JSON value."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate
    assert "\x00" not in text and "\\u0000" not in text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"score": float("nan")}, {"score": None}),
        ({"score": float("inf")}, {"score": None}),
        ([json.loads("1e999"), -math.inf, 1.5], [None, None, 1.5]),
        ({"content": "a\x00b"}, {"content": f"a{REPLACEMENT}b"}),
        ({"content": "a\ud800b\udfff"}, {"content": f"a{REPLACEMENT}b{REPLACEMENT}"}),
        ({"k\x00\ud800": 1}, {f"k{REPLACEMENT}{REPLACEMENT}": 1}),
    ],
)
def test_what_no_backend_stores_is_replaced_and_reported(value, expected):
    result, replaced = storable_json(value)
    assert replaced
    assert result == expected
    assert_storable_everywhere(result)


def test_storable_values_come_back_as_they_were():
    value = {"type": "ANSWER", "content": "Résumé — 株価 📈", "n": [1, 2.5, True, None, {}]}
    result, replaced = storable_json(value)
    assert not replaced
    assert result is value  # untouched: nothing copied on the streaming path


def test_nesting_deeper_than_the_bound_is_unstorable():
    assert storable_json(nested(MAX_DEPTH - 1)) == (nested(MAX_DEPTH - 1), False)
    with pytest.raises(UnstorableValue):
        storable_json(nested(MAX_DEPTH + 1))


def test_an_event_nested_too_deep_keeps_its_other_fields_and_its_text():
    raw = json.dumps({"chat_id": "c", "message": {"type": "ANSWER", "content": "kept"}})
    data = {"type": "ANSWER", "content": "kept", "extra": nested(975)}
    message, replaced = storable_message(data, raw)
    assert replaced
    assert message == {"type": "ANSWER", "content": "kept", "unstorable": True, "text": raw}


def test_an_unusable_event_without_wire_text_keeps_its_json():
    message, replaced = storable_message({"type": "STRUCTURED_OUTPUT", "content": nested(70)}, None)
    assert replaced
    assert message["type"] == "STRUCTURED_OUTPUT" and "content" not in message
    assert json.loads(message["text"]) == {"type": "STRUCTURED_OUTPUT", "content": nested(70)}


def test_storable_event_keeps_the_class_and_cleans_identifiers():
    event = AnswerEvent(content="x\ud800", chat_id="up\x00", raw='{"message": "as sent"}')
    clean, data, replaced = storable_event(event)
    assert replaced
    assert type(clean) is AnswerEvent
    assert (clean.content, clean.chat_id) == (f"x{REPLACEMENT}", f"up{REPLACEMENT}")
    assert clean.raw == event.raw
    assert data == clean.data
    assert storable_event(clean) == (clean, clean.data, False)


def test_a_storable_event_is_returned_as_it_is():
    event = AnswerEvent(content="Revenue rose 12%.", chat_id="c")
    assert storable_event(event).event is event


def test_structured_output_nested_too_deep_keeps_the_wire_text():
    raw = '{"message": {"type": "STRUCTURED_OUTPUT", "content": [[[...]]]}}'
    clean, data, replaced = storable_event(StructuredOutputEvent(content=nested(975), raw=raw))
    assert replaced
    assert (clean.content, clean.raw) == (None, raw)
    assert data == {"type": "STRUCTURED_OUTPUT", "unstorable": True, "text": raw}


text_with_anything = st.text(st.characters(codec=None, categories=None))  # NUL, surrogates too


@given(text_with_anything, text_with_anything | st.none())
@example(content="plain", chat_id="up\x00")  # each field that can carry what no backend stores
@example(content="plain", chat_id="\ud800")
@example(content="a\x00", chat_id="plain")
@example(content="\udfff", chat_id=None)
@settings(max_examples=300)
@pytest.mark.parametrize("kind", [AnswerEvent, ThinkingEvent])  # a delta has a path of its own
def test_a_text_only_event_is_judged_as_walking_its_data_judges_it(kind, content, chat_id):
    event = kind(content=content, chat_id=chat_id)
    expected, replaced = storable_json(event.data)
    clean, data, was_replaced = storable_event(event)
    assert (data, was_replaced) == (expected, replaced)
    assert (clean is event) is not replaced


def test_an_answer_delta_has_no_text_but_its_content_and_chat_id():
    # storable_event judges a delta by its type, content and chat id: a new field must be too
    names = {f.name for f in dataclasses.fields(AnswerEvent)}
    assert names == {"type", "chat_id", "raw", "content"}
    assert set(AnswerEvent(content="a", chat_id="b").data) == {"type", "content", "chat_id"}


def test_text_without_anything_to_replace_is_the_same_object():
    text = "plain ascii " * 100
    assert storable_text(text)[0] is text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and ±inf included
    | st.text(st.characters(codec=None, categories=None)),  # NUL and lone surrogates too
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(st.characters(codec=None, categories=None)), children, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_json_value_becomes_storable(value):
    result, replaced = storable_json(value)
    assert_storable_everywhere(result)
    if not replaced:
        assert result is value


@pytest.mark.django_db
@given(json_values)
@settings(max_examples=40, deadline=None)
def test_any_json_value_is_stored_by_the_test_database(value):
    from django.contrib.auth.models import User

    from chats.models import Chat, Turn, TurnEvent

    owner, _ = User.objects.get_or_create(username="storable")
    turn = Turn.objects.create(chat=Chat.objects.create(owner=owner), question="q")
    result, _ = storable_json({"type": "ANSWER", "content": value})
    TurnEvent.objects.create(turn=turn, seq=1, type="ANSWER", data=result)
    # Read back whole (numbers may come back normalised: jsonb keeps 4.35e16 as an integer).
    assert TurnEvent.objects.get(turn=turn).data.keys() == {"type", "content"}
