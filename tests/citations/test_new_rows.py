"""Rows inserted by `insert_rows` are the rows `bulk_create` stores, value for value."""

import sqlite3

import pytest
from django.db import connection
from django.db.models import F, JSONField, Value

from citations.models import Reference, Source
from citations.new_rows import insert_rows

pytestmark = pytest.mark.django_db

# What COPY's text format escapes, and what JSON and the database make of it.
AWKWARD = 'tab\there, new\nline, cr\r, back\\slash \\N, quote "\'", Résumé 東京 📈'


def references(turn, source) -> list[dict]:
    """Two rows by field, as the model's constructor takes them: the second leaves fields out."""
    return [
        {
            "turn_id": turn.pk,
            "position": 0,
            "start": 0,
            "end": 12,
            "tool_name": AWKWARD,
            "audit_id": "",
            "source_id": source.pk,
            "is_valid": True,
            "footnote": 1,
            "passages": [{"text": AWKWARD, "relevance": 0.5}],
            "claim_check": {"verdict": "matches", "figures": [1, 2.5, None, True]},
            "page": None,  # SQL's NULL
            "data": {"text": AWKWARD, "nested": {"list": [], "empty": ""}},
        },
        {
            "turn_id": turn.pk,
            "position": 1,
            "start": None,
            "is_valid": False,
            "problem": "no such source",
            "data": Value(None, JSONField()),  # JSON's null
        },
    ]


def stored(turn) -> list[dict]:
    rows = Reference.objects.filter(turn=turn).order_by("position").values()
    return [{k: v for k, v in row.items() if k not in {"id", "turn_id"}} for row in rows]


def test_rows_are_stored_as_bulk_create_stores_them(make_turn):
    source = Source.objects.create(key="doc-1", name=AWKWARD, data={})
    by_copy, by_orm = make_turn(), make_turn()
    insert_rows(Reference, references(by_copy, source))
    Reference.objects.bulk_create(Reference(**row) for row in references(by_orm, source))

    assert stored(by_copy) == stored(by_orm)
    assert stored(by_copy)[0]["tool_name"] == AWKWARD
    nulls = Reference.objects.filter(turn=by_copy, position=1)
    assert nulls.filter(data=Value(None, JSONField())).exists()  # JSON's null, stored as such
    assert Reference.objects.filter(turn=by_copy, page__isnull=True).count() == 2


def test_nothing_to_insert_is_no_statement(django_assert_num_queries):
    with django_assert_num_queries(0):
        insert_rows(Reference, [])


def test_rows_past_sqlites_limit_on_variables_go_in_several_statements(make_turn):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's limit on a statement's variables")
    source = Source.objects.create(key="doc-1", name="Doc", data={})
    turn = make_turn()
    connection.ensure_connection()
    raw = connection.connection
    limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    inserts: list[str] = []
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100)  # 6 rows of 15 values: 4 a statement
    raw.set_trace_callback(lambda sql: inserts.append(sql) if sql.startswith("INSERT") else None)
    try:
        insert_rows(
            Reference,
            [
                {"turn_id": turn.pk, "position": i, "source_id": source.pk, "data": {"i": i}}
                for i in range(37)
            ],
        )
    finally:
        raw.set_trace_callback(None)
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    assert len(inserts) == 10  # 9 of 4 rows, then 1
    rows = Reference.objects.filter(turn=turn).values_list("position", "data", "source_id")
    assert list(rows) == [(i, {"i": i}, source.pk) for i in range(37)]


def test_a_json_value_is_its_json_and_any_other_expression_is_refused(make_turn):
    turn = make_turn()
    row = {"turn_id": turn.pk, "position": 0, "data": Value({"a": [1]}, JSONField())}
    insert_rows(Reference, [row])
    assert Reference.objects.get(turn=turn).data == {"a": [1]}
    with pytest.raises(TypeError):
        insert_rows(Reference, [{"turn_id": turn.pk, "position": F("position") + 1, "data": {}}])


def test_a_field_the_model_does_not_have_is_refused_and_nothing_is_inserted(make_turn):
    turn = make_turn()
    rows = [
        {"turn_id": turn.pk, "position": 0, "data": {}},
        {"turn": turn, "position": 1, "data": {}},  # the relation's name, not its column's
    ]
    with pytest.raises(TypeError, match="Reference has no field turn"):
        insert_rows(Reference, rows)
    assert not Reference.objects.filter(turn=turn).exists()
