"""Many new rows of one model at once, when nothing needs their ids back.

On PostgreSQL they go in by one COPY. Django's `bulk_create` there is an `INSERT ... SELECT
FROM UNNEST(arrays)`, whose arrays psycopg quotes element by element in Python (client-side
binding): a finish's references took 109 µs a row that way and 52 by COPY, the server's work
included (docs/PERFORMANCE.md, "A finish's references go in by COPY"). Elsewhere,
`bulk_create`.

Each value is what `bulk_create` would send: the field's `pre_save`, then its
`get_db_prep_save`; JSON is written by the field's encoder, as its adapter would write it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from typing import Any

from django.db import connections, router
from django.db.models import JSONField, Model, Value

# COPY's text format: a backslash, and the row and column separators, are escaped; NULL is \N.
# (The event log's COPY, chats.live.event_log, escapes its text with the same table.)
COPY_ESCAPES = {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
_NULL = "\\N"


def insert_rows(model: type[Model], objs: Iterable[Model]) -> None:
    """Insert `objs` (new instances of `model`) in one statement; they get no primary key."""
    objs = list(objs)
    if not objs:
        return
    db = connections[router.db_for_write(model)]
    if db.vendor != "postgresql":
        model.objects.using(db.alias).bulk_create(objs)
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    lines = ["\t".join([_copy_value(field, obj, db) for field in fields]) + "\n" for obj in objs]
    table = db.ops.quote_name(model._meta.db_table)
    columns = ", ".join(db.ops.quote_name(f.column) for f in fields)
    # The driver's own cursor (Django's wrapper has no COPY), its errors given Django's classes.
    with (
        db.cursor() as cursor,
        db.wrap_database_errors,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
    ):
        copy.write("".join(lines).encode())


def _copy_value(field: Any, obj: Model, db: Any) -> str:
    value = field.pre_save(obj, True)
    if isinstance(field, JSONField):
        if isinstance(value, Value):  # Value(None, JSONField()): JSON's null, not SQL's NULL
            value = value.value
        elif value is None:
            return _NULL
        return json.dumps(value, cls=field.encoder).translate(COPY_ESCAPES)
    if value is None:
        return _NULL
    value = field.get_db_prep_save(value, db)
    if value is None:
        return _NULL
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int | float | str):
        return str(value).translate(COPY_ESCAPES)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} in {field.name}: no COPY text for it here")
