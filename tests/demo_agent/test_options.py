"""The demo agent honours the request options: period and entity filters, expected output,
a structured output schema (the result validates), the model tier, and a 403 for pro."""

from __future__ import annotations

from http import HTTPStatus

import jsonschema
import pytest

from demo_agent import DemoAgentApp
from tests.servers import serve_asgi

from .conftest import SECRET
from .test_demo_agent import ask, post


def search(**query_filters):
    return {"tools_configs": {"search": {"query_filters": query_filters}}}


def cited_days(reply) -> set[str]:
    return {r["source"]["ts"][:10] for r in reply.references if r["source"]}


def test_period_filter_keeps_only_documents_in_the_period(agent_url):
    unfiltered = ask(agent_url, "How did NVIDIA do?")
    days = sorted(cited_days(unfiltered))
    assert len(days) > 1
    start = end = days[-1]
    reply = ask(agent_url, "How did NVIDIA do?", **search(period={"start": start, "end": end}))
    assert reply.references and cited_days(reply) == {start}
    audited = {v["ts"][:10] for t in reply.audit_traces for r in t["results"] for v in r["values"]}
    assert audited <= {start}


def test_period_with_nothing_in_it_finds_nothing(agent_url):
    reply = ask(agent_url, "How did NVIDIA do?", **search(period={"end": "2000-01-01"}))
    assert reply.references == []


def test_entity_filters(agent_url):
    question = "What are analysts saying about AI spending?"
    none_of = ask(agent_url, question, **search(entities={"none_of": ["NVIDIA"]}))
    assert "nvidia" not in none_of.cited_companies()
    any_of = ask(agent_url, question, **search(entities={"any_of": ["msft"]}))
    assert any_of.cited_companies() <= {"microsoft"}
    all_of = ask(agent_url, "How did Apple do?", **search(entities={"all_of": ["Apple"]}))
    assert all_of.references and all_of.cited_companies() == {"apple"}


def test_expected_output_bullet_points_gives_a_list(agent_url):
    prose = ask(agent_url, "How did NVIDIA do?", "lite")
    assert "\n- " not in prose.transcript.answer
    listed = ask(agent_url, "How did NVIDIA do?", "lite", expected_output="bullet points")
    assert "\n- " in listed.transcript.answer


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": {
                "company": {"type": "string"},
                "revenue": {"type": "number"},
                "source": {"type": "string"},
                "date": {"type": "string"},
            },
            "required": ["company", "revenue"],
        },
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"headline": {"type": "string"}, "figure": {"type": "integer"}},
                "required": ["headline", "figure"],
            },
        },
    ],
)
def test_structured_output_follows_the_schema(agent_url, schema):
    reply = ask(agent_url, "How did NVIDIA do?", structured_output_schema=schema)
    assert "STRUCTURED_OUTPUT" in reply.types
    content = reply.transcript.structured_output
    jsonschema.validate(content, schema)
    if schema["type"] == "object":
        assert content["company"] == "NVIDIA" and content["revenue"] > 0
    else:
        assert content and all(row["headline"] for row in content)


def test_a_schema_whose_top_level_is_not_an_object_is_422(agent_url):
    response = post(
        agent_url,
        {
            "message": "Hi",
            "research_effort": "lite",
            "structured_output_schema": {"type": "string"},
        },
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_pro_writes_more_says_so_and_reports_its_tier(agent_url):
    base = ask(agent_url, "How did NVIDIA do?", "lite")
    pro = ask(agent_url, "How did NVIDIA do?", "lite", model_name="pro")
    assert len(pro.references) > len(base.references)
    assert "pro model" in pro.transcript.answer
    usage = {c["type"]: c for c in pro.transcript.consumption}
    assert usage["pro"]["output_tokens"] > 0 and usage["base"]["output_tokens"] == 0
    usage = {c["type"]: c for c in base.transcript.consumption}
    assert usage["base"]["output_tokens"] > 0 and usage["pro"]["output_tokens"] == 0


def test_pro_is_403_when_the_key_is_not_entitled():
    with serve_asgi(DemoAgentApp(SECRET, pace=0, pro_entitled=False)) as url:
        response = post(
            f"{url}/v1/research-agent",
            {"message": "Hi", "research_effort": "lite", "model_name": "pro"},
        )
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert "pro" in response.json()["detail"]
        assert post(
            f"{url}/v1/research-agent", {"message": "Hi", "research_effort": "lite"}
        ).is_success
