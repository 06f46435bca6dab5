"""Many rows written by one UPDATE: each gets its own values, as `save` would write them."""

from __future__ import annotations

import pytest
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chats.models import Chat, Turn
from chats.row_updates import ROWS_PER_STATEMENT, update_rows

pytestmark = pytest.mark.django_db

FIELDS = ["status", "error_kind", "answer_text", "charts", "notices", "lease_expires_at"]


def turns(user, count: int) -> list[Turn]:
    chat = Chat.objects.create(owner=user)
    return Turn.objects.bulk_create(
        Turn(chat=chat, question="q", lease_expires_at=timezone.now()) for _ in range(count)
    )


def test_each_row_gets_its_own_values_in_one_statement_per_chunk(user):
    rows = turns(user, ROWS_PER_STATEMENT + 3)
    for i, turn in enumerate(rows):
        turn.status = Turn.Status.COMPLETE if i % 2 else Turn.Status.FAILED
        turn.error_kind = "" if i % 2 else Turn.ErrorKind.AGENT
        turn.answer_text = f"answer {i}: 'quoted', \\ and — ünïcode"
        turn.charts = [{"i": i, "nested": {"n": None, "ok": True}}] if i % 3 else []
        turn.notices = [f"notice {i}"]
        turn.lease_expires_at = None  # a column of NULLs only
    untouched = Turn.objects.create(chat=rows[0].chat, question="other", answer_text="kept")
    with CaptureQueriesContext(connection) as queries:
        update_rows(rows, FIELDS)
    assert len(queries.captured_queries) == 2
    stored = {t.pk: t for t in Turn.objects.filter(pk__in=[t.pk for t in rows])}
    for turn in rows:
        got = stored[turn.pk]
        assert [getattr(got, f) for f in FIELDS] == [getattr(turn, f) for f in FIELDS]
        assert got.question == "q"  # fields not named are left as they are
    assert Turn.objects.get(pk=untouched.pk).answer_text == "kept"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite keeps any length of text")
def test_a_value_too_long_for_its_column_is_refused_not_cut(user):
    (turn,) = turns(user, 1)
    turn.error_kind = "x" * 40  # the column holds 32
    with pytest.raises(DataError):
        update_rows([turn], ["error_kind"])
