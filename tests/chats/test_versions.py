"""Re-run a finished answer as a new version, with its options; compare two versions on the
chat, on a share and in the JSON export."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client as HttpClient
from django.urls import reverse

from chats.library.services import chat_share
from chats.models import OutputSchema, Turn
from demo_agent.scripted import Reply, cited_answer_stream

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = cited_answer_stream(
    [("Revenue rose 12% to $4.1 billion.", "Reuters"), ("Demand was strong.", "Bloomberg")]
)
SECOND = cited_answer_stream(
    [("Revenue rose 14% to $4.2 billion.", "Reuters"), ("Demand was strong.", "Nikkei")]
)


async def ask_and_finish(client, frame: dict) -> int:
    await client.send(frame)
    started = (await client.receive_until("turn.started"))[-1]
    finished = await client.receive_until("turn.finished", turn_id=started["turn_id"])
    assert finished[-1]["status"] == "complete"
    return started["turn_id"]


async def two_versions(connect, user, chat, upstream) -> tuple[int, int]:
    upstream.queue(Reply.events(*FIRST), Reply.events(*SECOND))
    client = await connect(user, chat)
    options = {"model": "pro", "expected_output": "A short paragraph."}
    first = await ask_and_finish(
        client,
        {"type": "ask", "message": "How did revenue do?", "research_effort": "lite",
         "options": options},
    )  # fmt: skip
    # The composer moves on; the re-run still asks as the first version was asked.
    await database_sync_to_async(type(chat).objects.filter(pk=chat.pk).update)(options={})
    second = await ask_and_finish(client, {"type": "rerun", "turn_id": first})
    return first, second


async def test_rerun_asks_the_same_question_with_the_same_options_as_a_sibling(
    connect, user, chat, upstream
):
    first, second = await two_versions(connect, user, chat, upstream)

    old, new = [await Turn.objects.aget(pk=pk) for pk in (first, second)]
    assert (new.parent_id, new.question, new.research_effort) == (
        old.parent_id, "How did revenue do?", "lite",
    )  # fmt: skip
    assert new.options == old.options == {"model": "pro", "expected_output": "A short paragraph."}
    first_body, second_body = upstream.payloads
    assert second_body["message"] == first_body["message"]
    assert second_body["model_name"] == "pro"
    assert second_body["expected_output"] == "A short paragraph."
    assert second_body["research_effort"] == "lite"
    chat_options = await database_sync_to_async(
        lambda: type(chat).objects.get(pk=chat.pk).options
    )()
    assert chat_options == {}  # a re-run leaves the composer's options alone


async def test_rerun_keeps_a_saved_schema(connect, user, chat, upstream):
    schema = await OutputSchema.objects.acreate(
        owner=user, name="Rev", schema={"type": "object", "properties": {"r": {"type": "number"}}}
    )
    upstream.queue(Reply.events(*FIRST), Reply.events(*SECOND))
    client = await connect(user, chat)
    first = await ask_and_finish(
        client,
        {"type": "ask", "message": "Revenue?", "options": {"schema_id": schema.pk}},
    )
    await ask_and_finish(client, {"type": "rerun", "turn_id": first})
    assert upstream.payloads[1]["structured_output_schema"] == schema.schema


async def test_rerun_of_a_turn_of_another_chat_is_refused(
    connect, user, chat, other_user, upstream
):
    other_chat = await type(chat).objects.acreate(owner=other_user)
    theirs = await Turn.objects.acreate(
        chat=other_chat, question="Secret?", status=Turn.Status.COMPLETE
    )
    client = await connect(user, chat)
    await client.send({"type": "rerun", "turn_id": theirs.pk})
    frame = await client.receive()
    assert (frame["type"], frame["code"]) == ("error", "not_found")
    assert upstream.requests == []


async def test_compare_page_shows_figures_sources_and_words(connect, user, chat, upstream):
    _first, second = await two_versions(connect, user, chat, upstream)
    http = HttpClient()
    await database_sync_to_async(http.force_login)(user)
    url = reverse("turn_compare", args=[chat.pk, second])
    response = await database_sync_to_async(http.get)(url)
    page = response.content.decode()

    assert response.status_code == 200
    assert "2 figures changed, 1 source added, 1 dropped" in page
    assert "<del>12%</del> → <ins>14%</ins>" in page
    assert "<del>$4.1 billion</del> → <ins>$4.2 billion</ins>" in page
    assert "Added: <a" in page and "Nikkei - 2026-04-15</a>" in page
    assert "Dropped: <a" in page and "Bloomberg - 2026-04-15</a>" in page
    assert "<del>12% </del><ins>14% </ins>" in page  # the answer's words


async def test_compare_is_for_the_owner_only(connect, user, other_user, chat, upstream):
    _, second = await two_versions(connect, user, chat, upstream)
    http = HttpClient()
    await database_sync_to_async(http.force_login)(other_user)
    url = reverse("turn_compare", args=[chat.pk, second])
    assert (await database_sync_to_async(http.get)(url)).status_code == 404


async def test_a_share_that_holds_both_versions_compares_them(
    connect, user, other_user, chat, upstream
):
    _first, second = await two_versions(connect, user, chat, upstream)
    fresh = await type(chat).objects.aget(pk=chat.pk)
    share = await database_sync_to_async(chat_share)(chat=fresh, user=user)
    http = HttpClient()
    await database_sync_to_async(http.force_login)(other_user)
    shared = await database_sync_to_async(http.get)(reverse("chat_shared", args=[share.token]))
    compare_url = reverse("shared_turn_compare", args=[share.token, second])
    assert compare_url in shared.content.decode()

    page = (await database_sync_to_async(http.get)(compare_url)).content.decode()
    assert "<del>12%</del> → <ins>14%</ins>" in page
    # A version made after the share was made is not the share's to show.
    later = await Turn.objects.acreate(
        chat_id=chat.pk, question="How did revenue do?", status=Turn.Status.COMPLETE,
        answer_text="Revenue rose 20%.",
    )  # fmt: skip
    page = (await database_sync_to_async(http.get)(f"{compare_url}?b={later.pk}")).content.decode()
    assert f'value="{later.pk}"' not in page
    assert "<del>12%</del> → <ins>14%</ins>" in page


async def test_json_export_includes_every_version(connect, user, chat, upstream):
    first, second = await two_versions(connect, user, chat, upstream)
    http = HttpClient()
    await database_sync_to_async(http.force_login)(user)
    response = await database_sync_to_async(http.get)(reverse("chat_export_json", args=[chat.pk]))
    [turn] = json.loads(response.content)["turns"]
    assert (turn["id"], turn["version"]) == (second, 2)
    assert [v["id"] for v in turn["versions"]] == [first, second]
    assert "12%" in turn["versions"][0]["answer"] and "14%" in turn["versions"][1]["answer"]


def test_compare_with_one_finished_version_says_so(user, chat):
    only = Turn.objects.create(chat=chat, question="Q?", status=Turn.Status.COMPLETE)
    Turn.objects.create(chat=chat, question="Q?")  # still streaming
    http = HttpClient()
    http.force_login(user)
    page = http.get(reverse("turn_compare", args=[chat.pk, only.pk])).content.decode()
    assert "fewer than two finished versions" in page


@pytest.mark.parametrize("provider", ["gemini", "xai", "openai", "anthropic", "llm-sdk"])
async def test_rerun_and_compare_work_for_every_agent(
    provider, connect, user, settings, provider_fixtures_dir
):
    from chats.services import chat_create
    from demo_agent.scripted import ScriptedAgent
    from tests.chats.agent.test_providers_site import CAPTURES, capture_reply, configure
    from tests.servers import serve_asgi

    capture = provider_fixtures_dir / CAPTURES[provider]
    stand_in = ScriptedAgent()
    with serve_asgi(stand_in) as url:
        configure(settings, provider, url)
        stand_in.queue(capture_reply(capture), capture_reply(capture))
        chat = await database_sync_to_async(chat_create)(owner=user, provider=provider)
        client = await connect(user, chat)
        first = await ask_and_finish(client, {"type": "ask", "message": "What happened?"})
        second = await ask_and_finish(client, {"type": "rerun", "turn_id": first})
    # The same question, with the same (empty) history: a version of the first, not a follow-up.
    assert stand_in.requests[0].json == stand_in.requests[1].json
    assert (await Turn.objects.aget(pk=second)).parent_id is None
    http = HttpClient()
    await database_sync_to_async(http.force_login)(user)
    page = await database_sync_to_async(http.get)(reverse("turn_compare", args=[chat.pk, second]))
    assert "No figures or sources changed" in page.content.decode()
