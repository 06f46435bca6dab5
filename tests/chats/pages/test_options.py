"""The structured output schema editor, and the composer's Options panel on the chat page."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.models import Chat, OutputSchema

pytestmark = pytest.mark.django_db

GOOD = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "number"}}}}


def nested_schema(levels: int) -> dict:
    schema = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def save(client, name: str, schema) -> object:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return client.post(reverse("output_schemas"), {"name": name, "schema": text})


def test_a_valid_schema_is_saved_for_its_owner_only(client, user, other_user):
    client.force_login(user)
    assert save(client, "Rows", GOOD).status_code == HTTPStatus.FOUND
    assert OutputSchema.objects.get(owner=user).schema == GOOD
    client.force_login(other_user)
    assert "Rows" not in client.get(reverse("output_schemas")).content.decode()
    mine = OutputSchema.objects.get(owner=user)
    response = client.post(reverse("output_schema_delete", args=[mine.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ("{not json", "must be JSON"),
        ({"type": "string"}, "top level must be an object"),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema"),
        (nested_schema(100), "A schema may nest at most 32 levels"),  # the validator's recursion
    ],
)
def test_invalid_schemas_are_refused_with_the_reason(client, user, schema, expected):
    client.force_login(user)
    response = save(client, "Bad", schema)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert expected in response.content.decode()
    assert not OutputSchema.objects.exists()


def test_the_chat_page_shows_the_chats_options_and_the_users_schemas(client, user):
    saved = OutputSchema.objects.create(owner=user, name="Rows", schema=GOOD)
    chat = Chat.objects.create(
        owner=user,
        options={"model": "pro", "entities_any_of": ["NVIDIA", "AMD"], "schema_id": saved.pk},
    )
    client.force_login(user)
    html = client.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert 'id="options-toggle"' in html
    assert '<option value="pro" selected>' in html
    assert 'value="NVIDIA, AMD"' in html
    assert f'<option value="{saved.pk}" selected>Rows</option>' in html
    assert "chats/options.js" in html
