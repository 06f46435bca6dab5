"""The JSON API against the real served site: chats, turns, isolation, limits and errors."""

from __future__ import annotations

import pytest

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, Stall
from tests.chats.api.conftest import CLAIMS, api_client, cited_reply, token_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_ask_and_wait_gives_the_cited_answer_as_an_ordinary_chat(api, upstream, user):
    upstream.queue(cited_reply())
    created = api.post("/chats", json={"title": "Chips"})
    assert created.status_code == 201, created.text
    chat = created.json()
    assert chat["title"] == "Chips" and chat["agent"] == "bigdata"

    asked = api.post(
        f"/chats/{chat['id']}/turns?wait=true", json={"question": "How did NVIDIA do?"}
    )
    assert asked.status_code == 201, asked.text
    turn = asked.json()
    assert turn["status"] == "complete"
    assert turn["answer_text"] == " ".join(sentence for sentence, _ in CLAIMS)
    assert [s["publisher"] for s in turn["sources"]] == ["Reuters", "Bloomberg"]
    assert [(c["footnote"], c["text"]) for c in turn["citations"]] == [
        (1, CLAIMS[0][0]),
        (2, CLAIMS[1][0]),
    ]
    assert turn["citations"][0]["source_id"] == turn["sources"][0]["id"]
    assert turn["checks_summary"] == "2 cited claims: 2 figures found"
    assert "[^t" in turn["answer_markdown"] and "Reuters" in turn["answer_markdown"]
    assert turn["events_url"].endswith(f"/api/v1/turns/{turn['id']}/events")
    # An ordinary chat of the user's library, with the same answer.
    stored = Turn.objects.get(pk=turn["id"])
    assert stored.chat.owner == user and stored.answer_text == turn["answer_text"]
    assert api.get(f"/turns/{turn['id']}").json() == turn
    detail = api.get(f"/chats/{chat['id']}").json()
    assert detail["branch"] == [turn["id"]] and detail["turns"][0]["status"] == "complete"


def test_another_users_token_gets_404_and_no_token_401(site, user, other_user):
    chat = Chat.objects.create(owner=user, title="Mine")
    turn = Turn.objects.create(chat=chat, question="q", status=Turn.Status.COMPLETE)
    with api_client(site, token_for(other_user)) as intruder:
        for path in (f"/chats/{chat.pk}", f"/turns/{turn.pk}", f"/turns/{turn.pk}/events"):
            answer = intruder.get(path)
            assert (answer.status_code, answer.json()) == (404, {"detail": "Not Found"}), path
        assert intruder.post(f"/chats/{chat.pk}/turns", json={"question": "q"}).status_code == 404
        assert intruder.delete(f"/chats/{chat.pk}").status_code == 404
        assert intruder.get("/chats").json()["results"] == []
    with api_client(site, None) as anonymous:
        answer = anonymous.get(f"/chats/{chat.pk}")
        assert answer.status_code == 401 and "Authorization: Bearer" in answer.json()["detail"]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_a_read_token_asking_gets_403_and_bad_tokens_401(site, user):
    from datetime import timedelta

    from django.utils import timezone

    from chats.api.models import ApiToken

    chat = Chat.objects.create(owner=user)
    with api_client(site, token_for(user, "read", name="reader")) as reader:
        assert reader.get(f"/chats/{chat.pk}").status_code == 200
        refused = reader.post(f"/chats/{chat.pk}/turns", json={"question": "q"})
        assert refused.status_code == 403 and "'ask'" in refused.json()["detail"]
    soon = token_for(user, name="soon")
    ApiToken.objects.filter(name="soon").update(expires_at=timezone.now() - timedelta(seconds=1))
    revoked = token_for(user, name="revoked")
    ApiToken.objects.filter(name="revoked").update(revoked_at=timezone.now())
    for token in (soon, revoked, "rsk_" + "x" * 43, "not-even-ours"):
        with api_client(site, token) as bad:
            assert bad.get(f"/chats/{chat.pk}").status_code == 401, token
    assert not Turn.objects.exists()


def test_limits_answer_409_and_429_as_the_page_is_refused(api, upstream, user, settings):
    settings.AGENT_MAX_CONCURRENT_TURNS = 2
    upstream.respond = lambda request: Reply(body=[Stall()])  # every turn streams on
    first, second, third = (api.post("/chats", json={}).json()["id"] for _ in range(3))
    assert api.post(f"/chats/{first}/turns", json={"question": "a"}).status_code == 201
    busy = api.post(f"/chats/{first}/turns", json={"question": "b"})
    assert busy.status_code == 409 and "still answering" in busy.json()["detail"]
    assert api.post(f"/chats/{second}/turns", json={"question": "c"}).status_code == 201
    many = api.post(f"/chats/{third}/turns", json={"question": "d"})
    assert many.status_code == 429 and "2 answers being written" in many.json()["detail"]
    for turn in Turn.objects.filter(status="streaming"):
        assert api.post(f"/turns/{turn.pk}/stop").status_code == 202


def test_every_error_is_json_with_its_status(api):
    cases = [
        (api.get("/no-such-thing"), 404),
        (api.put("/chats"), 405),
        (api.post("/chats/1/turns", json={}), 400),  # no question
        (
            api.post("/chats", content=b"{not json", headers={"Content-Type": "application/json"}),
            400,
        ),
        (api.get("/chats/999999"), 404),
        (api.post("/chats", json={"agent": "nobody"}), 400),
        (api.get("/turns/1/events", headers={"Last-Event-ID": "five"}), 400),
    ]
    for answer, status in cases:
        assert answer.status_code == status, answer.text
        assert answer.headers["Content-Type"].startswith("application/json")
        assert isinstance(answer.json()["detail"], str) and answer.json()["detail"]
    outside = api.get("/../../api/nothing/here")
    assert outside.status_code == 404 and outside.json()["detail"]


def test_a_question_is_checked_as_the_page_checks_it(api, settings):
    chat = api.post("/chats", json={}).json()["id"]
    turns = f"/chats/{chat}/turns"
    long = api.post(turns, json={"question": "x" * (settings.MESSAGE_MAX_CHARS + 1)})
    assert long.status_code == 400 and "limited to" in long.json()["detail"]
    blank = api.post(turns, json={"question": "   "})
    assert blank.status_code == 400 and blank.json()["detail"] == "Write a question first."
    bad = api.post(turns, json={"question": "q", "options": {"freshness_boost": 11}})
    assert bad.status_code == 400 and "freshness_boost" in bad.json()["detail"]
    assert not Turn.objects.exists()


def test_a_token_in_the_url_is_refused(api):
    answer = api.get("/chats", params={"token": "rsk_abc"})
    assert answer.status_code == 400 and "never in the URL" in answer.json()["detail"]


def test_the_monthly_usage_limit_refuses_an_api_question_with_429(api, upstream, settings):
    """The start service's usage limit (chats/usage/) holds for the API as for the page."""
    from chats.usage.limits import resets_on
    from demo_agent.scripted import answer_stream

    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_001
    messages = answer_stream("An answer.")
    messages[-1] = {**messages[-1], "consumption": [
        {"type": "base", "input_tokens": 900, "output_tokens": 100}]}  # fmt: skip
    upstream.queue(Reply.events(*messages))
    chat = api.post("/chats", json={}).json()["id"]
    first = api.post(f"/chats/{chat}/turns?wait=true", json={"question": "a"})
    assert first.json()["usage"] == [
        {"model": "base", "input_tokens": 900, "cached_tokens": 0, "output_tokens": 100}
    ]
    second = api.post(f"/chats/{chat}/turns", json={"question": "b"})
    assert second.status_code == 429
    assert second.json()["detail"].startswith("You have used 1,000 of your 1,001 tokens")
    assert str(resets_on()) in second.json()["detail"]
    assert len(upstream.requests) == 1  # refused before any call reached the agent


def test_a_chat_shared_with_the_team_is_read_never_written_through_the_api(
    site, user, other_user, django_user_model
):
    from chats.teams.services import team_chat_share, team_create, team_member_add

    team = team_create(name="research", owner=user)
    team_member_add(team=team, by=user, username=other_user.username)
    outsider = django_user_model.objects.create_user("carol", password="pw-carol-12345")
    chat = Chat.objects.create(owner=user, title="Shared")
    turn = Turn.objects.create(chat=chat, question="q", status=Turn.Status.COMPLETE)
    team_chat_share(chat=chat, team=team, user=user)

    with api_client(site, token_for(other_user)) as member:
        assert member.get(f"/chats/{chat.pk}").json()["title"] == "Shared"
        assert member.get(f"/turns/{turn.pk}").json()["question"] == "q"
        for refused in (
            member.post(f"/chats/{chat.pk}/turns", json={"question": "mine?"}),
            member.patch(f"/chats/{chat.pk}", json={"title": "Mine"}),
            member.delete(f"/chats/{chat.pk}"),
            member.post(f"/turns/{turn.pk}/stop"),
        ):
            assert refused.status_code == 403 and "shared with you to read" in refused.text
    with api_client(site, token_for(outsider)) as stranger:
        assert stranger.get(f"/chats/{chat.pk}").status_code == 404
        assert stranger.get(f"/turns/{turn.pk}").status_code == 404
    chat.refresh_from_db()
    assert chat.title == "Shared" and Turn.objects.filter(chat=chat).count() == 1
