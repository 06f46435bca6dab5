"""The review admin: every page opens read-only, filters and links trace answers to evidence."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils import timezone

from chats.models import Chat, Turn, TurnEvent
from citations.models import AuditTrace, Reference, Source

pytestmark = pytest.mark.django_db

ANSWER = "Revenue rose 12%. Margins fell. Debt is stable."
ANSWER_HTML = (
    '<p>Revenue rose 12%.<sup class="footnote-ref"><a href="#fn-turn-1">1</a></sup> '
    "Margins fell. Debt is stable.</p>"
)


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def listed(response) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def make_source(n: int, **fields) -> Source:
    values = {
        "key": f"doc-{n}",
        "type": Source.Type.BIGDATA,
        "name": "Dow Jones",
        "headline": f"Quarterly results {n}",
        "url": f"https://dj.example/{n}",
        "published_on": dt.date(2026, 3, 10),
        "label": f"Dow Jones - 2026-03-10 #{n}",
        "data": {"id": f"doc-{n}", "type": "BIGDATA"},
    }
    return Source(**(values | fields))


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("alice", password="unused-password")


@pytest.fixture
def viewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


@pytest.fixture
def transcript(owner):
    """A chat whose answer cites a document, a tool call, and one reference that is not shown."""
    now = timezone.now()
    chat = Chat.objects.create(owner=owner, title="NVIDIA results", updated_at=now)
    turn = Turn.objects.create(
        chat=chat,
        question="How did NVIDIA do last quarter?",
        status=Turn.Status.COMPLETE,
        answer_text=ANSWER,
        answer_html=ANSWER_HTML,
        consumption=[
            {"type": "base", "input_tokens": 1200, "output_tokens": 340, "cached_tokens": 800},
            {"type": "pro", "input_tokens": 90, "output_tokens": 15, "cached_tokens": 0},
        ],
        upstream_chat_id="up-1",
        from_checkpoint_id="ckpt-1",
        checkpoint_id="ckpt-2",
        tool_error_count=1,
        created_at=now,
        finished_at=now + dt.timedelta(seconds=12.5),
    )
    follow_up = Turn.objects.create(
        chat=chat,
        parent=turn,
        question="And NVIDIA gaming revenue?",
        status=Turn.Status.FAILED,
        research_effort=Turn.Effort.LITE,
        answer_text="Gaming grew.",
        error="upstream said no",
        error_kind=Turn.ErrorKind.AGENT,
        created_at=now - dt.timedelta(days=40),
    )
    source = make_source(1, label="Dow Jones - 2026-03-10", headline="NVIDIA 10-Q Filing")
    external = make_source(
        2,
        type=Source.Type.EXTERNAL,
        name="Reuters",
        headline="Nvidia results",
        url="javascript:alert(1)",
        label="Reuters - 2026-04-16",
    )
    uncited = make_source(3, name="AP", url="https://ap.example/3", label="AP - 2026-02-02")
    Source.objects.bulk_create([source, external, uncited])
    trace = AuditTrace.objects.create(
        turn=turn,
        position=0,
        tool_id="audit-42",
        audit_type="SearchAuditV1",
        title="NVIDIA Q2 FY26 revenue",
        data={
            "tool_id": "audit-42",
            "results": [{"values": [{"hd": "NVIDIA 10-Q Filing"}, {"hd": "Nvidia results"}]}],
        },
        results=[{"headline": "NVIDIA 10-Q Filing"}, {"headline": "Nvidia results"}],
    )
    Reference.objects.bulk_create(
        [
            Reference(
                turn=turn,
                position=0,
                start=0,
                end=17,
                tool_name="search",
                audit_id="audit-42",
                source=source,
                audit_trace=trace,
                footnote=1,
                data={},
            ),
            Reference(
                turn=turn,
                position=1,
                start=18,
                end=31,
                tool_name="earnings_calendar",
                audit_id="audit-99",
                is_valid=False,
                problem="its audit id matches no trace",
                data={},
            ),
            Reference(turn=turn, position=2, start=32, end=47, source=source, footnote=1, data={}),
            Reference(
                turn=follow_up, position=0, start=0, end=12, source=source, footnote=1, data={}
            ),
        ]
    )
    TurnEvent.objects.bulk_create(
        TurnEvent(turn=turn, seq=seq, type=kind, data={"type": kind})
        for seq, kind in enumerate(["AUDIT", "GROUNDING", "ANSWER", "COMPLETE"], start=1)
    )
    return SimpleNamespace(
        chat=chat,
        turn=turn,
        follow_up=follow_up,
        source=source,
        external=external,
        uncited=uncited,
        trace=trace,
        event=turn.events.first(),
    )


def every_page(data) -> list[str]:
    models = [Chat, Turn, TurnEvent, Source, AuditTrace]
    objects = [data.chat, data.turn, data.event, data.source, data.trace]
    return [changelist_url(m) for m in models] + [change_url(o) for o in objects]


@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_every_page_opens_read_only(request, who, transcript):
    http = request.getfixturevalue(who)
    for url in every_page(transcript):
        response = http.get(url)
        assert response.status_code == HTTPStatus.OK, url
        assert b'name="_save"' not in response.content, url


def test_site_header(admin_client):
    response = admin_client.get(reverse("admin:index"))
    assert b"ResearchSite review" in response.content


def test_turn_page_traces_each_reference_to_its_source_and_tool_call(admin_client, transcript):
    response = admin_client.get(change_url(transcript.turn))
    html = response.content.decode()

    assert ANSWER_HTML in html  # the stored, sanitised rendering, not escaped
    assert "Revenue rose 12%." in html  # the cited span
    assert f'<a href="{change_url(transcript.source)}">Dow Jones - 2026-03-10</a>' in html
    assert f'<a href="{change_url(transcript.trace)}">audit-42</a>' in html
    assert "audit-99 (no matching trace)" in html
    assert "tool-level (no document)" in html
    assert "its audit id matches no trace" in html
    assert "<li>NVIDIA 10-Q Filing</li>" in html  # the trace's result headlines
    assert "NVIDIA Q2 FY26 revenue" in html
    assert "<td>base</td><td>1200</td><td>340</td><td>800</td>" in html
    assert "ckpt-1" in html and "ckpt-2" in html
    assert "12.5 s" in html
    assert f"{changelist_url(TurnEvent)}?turn={transcript.turn.pk}" in html
    assert "4 events" in html


def test_turn_without_stored_html_still_shows_its_answer(admin_client, transcript):
    response = admin_client.get(change_url(transcript.follow_up))
    html = response.content.decode()
    assert response.status_code == HTTPStatus.OK
    assert "Gaming grew." in html
    assert "upstream said no" in html


def test_event_log_is_paginated_and_filtered_by_turn(admin_client, transcript):
    TurnEvent.objects.bulk_create(
        TurnEvent(turn=transcript.follow_up, seq=seq, type="THINKING", data={"n": seq})
        for seq in range(1, 151)
    )
    url = f"{changelist_url(TurnEvent)}?turn={transcript.follow_up.pk}"

    first = admin_client.get(url)
    second = admin_client.get(url + "&p=2")

    assert [e.seq for e in first.context["cl"].result_list] == list(range(1, 101))
    assert [e.seq for e in second.context["cl"].result_list] == list(range(101, 151))
    assert "Turn " + str(transcript.follow_up.pk) in first.content.decode()  # names the turn


def test_event_log_filters_by_type(admin_client, transcript):
    response = admin_client.get(changelist_url(TurnEvent), {"type": "ANSWER"})
    assert [e.type for e in response.context["cl"].result_list] == ["ANSWER"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "results"}, ["chat"]),  # title
        ({"q": "gaming"}, ["chat"]),  # a question
        ({"q": "NVIDIA"}, ["chat"]),  # the title and both questions match: listed once
        ({"q": "nothing like it"}, []),
    ],
)
def test_chat_search(admin_client, transcript, query, expected):
    response = admin_client.get(changelist_url(Chat), query)
    assert [c.pk for c in response.context["cl"].result_list] == [
        getattr(transcript, name).pk for name in expected
    ]


def test_chat_list_counts_turns_and_filters(admin_client, transcript, django_user_model):
    other = django_user_model.objects.create_user("bob")
    Chat.objects.create(owner=other, title="Old", updated_at=timezone.now() - dt.timedelta(30))
    changelist = changelist_url(Chat)

    counts = {c.pk: c.turn_count for c in admin_client.get(changelist).context["cl"].result_list}
    by_owner = admin_client.get(changelist, {"owner__id__exact": transcript.chat.owner_id})
    recent = admin_client.get(
        changelist, {"updated_at__gte": timezone.now() - dt.timedelta(days=7)}
    )

    assert counts[transcript.chat.pk] == 2
    assert listed(by_owner) == {transcript.chat.pk}
    assert listed(recent) == {transcript.chat.pk}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "last quarter"}, {"turn"}),  # question
        ({"q": "Margins fell"}, {"turn"}),  # answer
        ({"status__exact": "failed"}, {"follow_up"}),
        ({"research_effort__exact": "lite"}, {"follow_up"}),
        ({"has_tool_errors": "yes"}, {"turn"}),
        ({"has_tool_errors": "no"}, {"follow_up"}),
        ({"created_at__gte": timezone.now() - dt.timedelta(days=7)}, {"turn"}),
    ],
)
def test_turn_search_and_filters(admin_client, transcript, query, expected):
    response = admin_client.get(changelist_url(Turn), query)
    assert listed(response) == {getattr(transcript, name).pk for name in expected}


def test_cites_filter_lists_each_citing_turn_once(admin_client, transcript):
    response = admin_client.get(changelist_url(Turn), {"cites": transcript.source.pk})
    assert [t.pk for t in response.context["cl"].result_list] == [
        transcript.turn.pk,  # cites the source twice, listed once
        transcript.follow_up.pk,
    ]
    assert "Dow Jones - 2026-03-10" in response.content.decode()  # the sidebar names the source


def test_cites_filter_rejects_a_non_id(admin_client, transcript):
    response = admin_client.get(changelist_url(Turn), {"cites": "x"})
    assert response.status_code == HTTPStatus.FOUND
    assert response.url.endswith("?e=1")


def test_source_cited_by_counts_distinct_answers_and_links_to_them(admin_client, transcript):
    response = admin_client.get(changelist_url(Source))
    html = response.content.decode()

    counts = {s.pk: s.cited_by_count for s in response.context["cl"].result_list}
    assert counts == {transcript.source.pk: 2, transcript.external.pk: 0, transcript.uncited.pk: 0}
    link = f"{changelist_url(Turn)}?cites={transcript.source.pk}"
    assert f'<a href="{link}">2 answers</a>' in html


def test_source_urls_link_only_when_http(admin_client, transcript):
    html = admin_client.get(changelist_url(Source)).content.decode()
    assert 'href="https://dj.example/1"' in html
    assert 'href="javascript:' not in html
    assert "javascript:alert(1)" in html  # shown as text


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "Reuters"}, {"external"}),  # outlet
        ({"q": "10-Q"}, {"source"}),  # headline
        ({"q": "ap.example"}, {"uncited"}),  # URL
        ({"type__exact": "EXTERNAL"}, {"external"}),
        ({"name": "AP"}, {"uncited"}),
    ],
)
def test_source_search_and_filters(admin_client, transcript, query, expected):
    response = admin_client.get(changelist_url(Source), query)
    assert listed(response) == {getattr(transcript, name).pk for name in expected}


@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_export_selected_turns_as_one_markdown_file(request, who, transcript):
    http = request.getfixturevalue(who)
    selected = [transcript.turn.pk, transcript.follow_up.pk]

    response = http.post(
        changelist_url(Turn), {"action": "export_markdown", "_selected_action": selected}
    )

    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"].startswith("attachment; filename=")
    markdown = response.content.decode()
    assert "How did NVIDIA do last quarter?" in markdown
    assert "And NVIDIA gaming revenue?" in markdown


@pytest.mark.parametrize("model", [Chat, Turn, TurnEvent, Source, AuditTrace])
def test_nothing_can_be_added(admin_client, model):
    add = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
    assert admin_client.get(add).status_code == HTTPStatus.FORBIDDEN


@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_a_posted_change_form_changes_nothing(request, who, transcript):
    http = request.getfixturevalue(who)
    response = http.post(change_url(transcript.turn), {"question": "Tampered", "answer_text": ""})
    assert response.status_code == HTTPStatus.FORBIDDEN
    transcript.turn.refresh_from_db()
    assert transcript.turn.question == "How did NVIDIA do last quarter?"
    assert transcript.turn.answer_text == ANSWER


def test_only_a_superuser_deletes(admin_client, viewer_client, transcript):
    delete = reverse("admin:chats_turn_delete", args=[transcript.follow_up.pk])

    assert viewer_client.get(delete).status_code == HTTPStatus.FORBIDDEN
    assert viewer_client.post(delete, {"post": "yes"}).status_code == HTTPStatus.FORBIDDEN
    assert Turn.objects.filter(pk=transcript.follow_up.pk).exists()

    assert admin_client.post(delete, {"post": "yes"}).status_code == HTTPStatus.FOUND
    assert not Turn.objects.filter(pk=transcript.follow_up.pk).exists()


def test_viewer_sees_no_delete_link_or_action(viewer_client, transcript):
    html = viewer_client.get(change_url(transcript.turn)).content.decode()
    assert "deletelink" not in html
    changelist = viewer_client.get(changelist_url(Turn))
    actions = [name for name, _ in changelist.context["action_form"].fields["action"].choices]
    assert "delete_selected" not in actions
    assert "export_markdown" in actions


@pytest.mark.parametrize("user", ["owner", None])
def test_non_staff_are_sent_to_the_admin_login(request, client, user, transcript):
    if user:
        client.force_login(request.getfixturevalue(user))
    for url in every_page(transcript):
        response = client.get(url)
        assert response.status_code == HTTPStatus.FOUND, url
        assert response.url.startswith(reverse("admin:login")), url


# --- Query counts ---------------------------------------------------------------------------
# Every page below is measured with ROWS rows on it; an N+1 would add at least ROWS queries.
# The counts do not depend on the number of rows in the table either: lists are paginated with
# show_full_result_count off (one COUNT, one page query), and annotations ride on that query.

ROWS = 60


@pytest.fixture
def many_turns(owner):
    """ROWS chats, the first with ROWS turns; each turn has two references, traces, events."""
    chats = Chat.objects.bulk_create(Chat(owner=owner, title=f"Chat {n}") for n in range(ROWS))
    sources = Source.objects.bulk_create(make_source(n) for n in range(ROWS))
    turns = Turn.objects.bulk_create(
        Turn(
            chat=chat,
            question=f"Question {n}",
            status=Turn.Status.COMPLETE,
            answer_text=ANSWER,
            answer_html=ANSWER_HTML,
            finished_at=timezone.now(),
        )
        for n, chat in enumerate([chats[0]] * ROWS + chats[1:])
    )
    traces = AuditTrace.objects.bulk_create(
        AuditTrace(turn=turn, position=p, tool_id=f"a-{turn.pk}-{p}", data={"results": []})
        for turn in turns
        for p in range(2)
    )
    Reference.objects.bulk_create(
        Reference(
            turn=trace.turn,
            position=trace.position,
            start=0,
            end=17,
            tool_name="search",
            audit_id=trace.tool_id,
            audit_trace=trace,
            source=sources[(n + trace.position) % ROWS],
            footnote=trace.position + 1,
            data={},
        )
        for n, trace in enumerate(traces)
    )
    TurnEvent.objects.bulk_create(
        TurnEvent(turn=turn, seq=seq, type="ANSWER", data={"content": "x"})
        for turn in turns
        for seq in range(1, 3)
    )
    return SimpleNamespace(chats=chats, sources=sources, turns=turns)


@pytest.fixture
def big_turn(owner):
    """One turn with ROWS references (each its own source) and ROWS audit traces."""
    chat = Chat.objects.create(owner=owner, title="Big")
    turn = Turn.objects.create(chat=chat, question="Everything?", answer_text=ANSWER * 10)
    sources = Source.objects.bulk_create(make_source(1000 + n) for n in range(ROWS))
    traces = AuditTrace.objects.bulk_create(
        AuditTrace(
            turn=turn,
            position=n,
            tool_id=f"t-{n}",
            data={"results": [{"values": [{"hd": f"Headline {n}"}]}]},
            results=[{"headline": f"Headline {n}"}],
        )
        for n in range(ROWS)
    )
    Reference.objects.bulk_create(
        Reference(
            turn=turn,
            position=n,
            start=n,
            end=n + 20,
            audit_id=f"t-{n}",
            audit_trace=traces[n],
            source=sources[n],
            data={},
        )
        for n in range(ROWS)
    )
    return turn


# Measured with Django 5.2 for a superuser: session, user, then the page's own queries. A staff
# user's permissions cost two more (user and group permissions), once per request.
def query_limit(who: str, superuser_queries: int) -> int:
    return superuser_queries + (2 if who == "viewer_client" else 0)


@pytest.fixture
def get_within(django_assert_max_num_queries):
    """GET a page in at most `limit` queries, once warm (content types are cached per process)."""

    def get(http, url: str, limit: int, data=None):
        http.get(url, data)
        with django_assert_max_num_queries(limit):
            response = http.get(url, data)
        assert response.status_code == HTTPStatus.OK
        return response

    return get


@pytest.mark.parametrize(
    ("model", "queries"),
    [(Chat, 6), (Turn, 4), (TurnEvent, 4), (Source, 5), (AuditTrace, 4)],
)
@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_changelist_query_count(request, who, model, queries, many_turns, get_within):
    http = request.getfixturevalue(who)
    response = get_within(http, changelist_url(model), query_limit(who, queries))
    assert len(response.context["cl"].result_list) >= ROWS


def test_filtered_turn_list_query_count(admin_client, many_turns, get_within):
    source = many_turns.sources[0]
    query = {"cites": source.pk, "q": "Question"}
    response = get_within(admin_client, changelist_url(Turn), 5, query)
    citing = Reference.objects.filter(source=source).values_list("turn", flat=True)
    assert listed(response) == set(citing)


@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_turn_page_query_count(request, who, big_turn, get_within):
    http = request.getfixturevalue(who)
    # The turn, its references with their sources, its traces, its chat and owner, the event
    # count, and two to render the answer (big_turn has no stored HTML: the costlier path).
    response = get_within(http, change_url(big_turn), query_limit(who, 10))
    assert response.content.decode().count("<li>Headline ") == ROWS  # each trace's results


@pytest.mark.parametrize(
    ("page", "queries"), [("chat", 5), ("source", 3), ("trace", 4), ("event", 4)]
)
def test_other_change_page_query_counts(admin_client, many_turns, page, queries, get_within):
    obj = {
        "chat": many_turns.chats[0],  # lists its ROWS turns inline
        "source": many_turns.sources[0],
        "trace": AuditTrace.objects.first(),
        "event": TurnEvent.objects.first(),
    }[page]
    get_within(admin_client, change_url(obj), queries)
