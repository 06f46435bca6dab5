"""/api/v1/openapi.json is a valid OpenAPI 3 document naming every endpoint; /api/v1/docs
shows it from the site's own files."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from chats.agent.options import FIELDS
from chats.api.schemas import QuestionOptions

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    ("get", "/api/v1/agents"),
    ("post", "/api/v1/chats"),
    ("get", "/api/v1/chats"),
    ("get", "/api/v1/chats/{chat_id}"),
    ("patch", "/api/v1/chats/{chat_id}"),
    ("delete", "/api/v1/chats/{chat_id}"),
    ("post", "/api/v1/chats/{chat_id}/turns"),
    ("get", "/api/v1/turns/{turn_id}"),
    ("get", "/api/v1/turns/{turn_id}/events"),
    ("post", "/api/v1/turns/{turn_id}/stop"),
    ("get", "/api/v1/search"),
    ("post", "/api/v1/webhooks"),
    ("get", "/api/v1/webhooks"),
    ("get", "/api/v1/webhooks/{webhook_id}/deliveries"),
    ("delete", "/api/v1/webhooks/{webhook_id}"),
}


def test_the_openapi_document_is_valid_and_names_every_endpoint(client):
    answer = client.get("/api/v1/openapi.json")
    assert answer.status_code == 200
    document = answer.json()
    validate(document)  # raises for anything OpenAPI 3 does not allow
    assert document["openapi"].startswith("3.")
    named = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert named == ENDPOINTS
    events = document["paths"]["/api/v1/turns/{turn_id}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    schemes = document["components"]["securitySchemes"]
    assert {scheme["scheme"] for scheme in schemes.values()} == {"bearer"}


def test_the_docs_load_the_sites_own_files(client):
    page = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page and "cdn" not in page.lower()


def test_the_apis_options_are_the_pages():
    assert set(QuestionOptions.model_fields) == set(FIELDS)
