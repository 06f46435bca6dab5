"""Many new rows of one model at once, when nothing needs their ids back.

On PostgreSQL they go in by one COPY. Django's `bulk_create` there is an `INSERT ... SELECT
FROM UNNEST(arrays)`, whose arrays psycopg quotes element by element in Python (client-side
binding). On SQLite they go in by a few multi-row INSERTs of the driver's own: `bulk_create`
compiles its statement value by value. Either way a row cost about half what `bulk_create`
took (docs/PERFORMANCE.md, "A finish's references go in without bulk_create"). Elsewhere,
`bulk_create`.

A row is given as the model's constructor would be, by field (`turn_id=...`), as a mapping:
no model instance is made for it (a fifth of a reference's cost). A field left out takes its
default. Each value is what `bulk_create` would send: the field's `get_db_prep_save`; JSON is
written by the field's encoder, as its adapter would write it.
"""

from __future__ import annotations

import datetime
import functools
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

from django.db import connections, router
from django.db.models import JSONField, Model, Value

_NULL = "\\N"  # COPY's text format for SQL's NULL


def copy_text(text: str) -> str:
    """`text` in COPY's text format: a backslash, and the row and column separators, escaped.
    Four `replace`s: `str.translate` with a table looks each character up, 3.5x as slow on a
    passage's JSON. The event log's COPY (chats.live.event_log) escapes its text here too."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def insert_rows(model: type[Model], rows: Iterable[Mapping[str, Any]]) -> None:
    """Insert new rows of `model` in one statement; they get no primary key.

    Each row maps fields to values by the name the model's constructor takes (`turn_id`, not
    `turn`): a name it does not have is refused, as the constructor refuses it."""
    rows = list(rows)
    if not rows:
        return
    db = connections[router.db_for_write(model)]
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    if any(getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False) for f in fields):
        raise TypeError(f"{model.__name__} has a field set on save (auto_now): use bulk_create")
    names = {f.attname for f in fields}
    for row in rows:
        if unknown := row.keys() - names:
            raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    if db.vendor not in ("postgresql", "sqlite"):
        model.objects.using(db.alias).bulk_create(model(**row) for row in rows)
        return
    defaults = {f.attname: f.get_default() for f in fields}  # what the constructor would give
    given = [{**defaults, **row} for row in rows]
    table = db.ops.quote_name(model._meta.db_table)
    columns = ", ".join(db.ops.quote_name(f.column) for f in fields)
    if db.vendor == "sqlite":
        values = [[_sqlite_value(f, row[f.attname], db) for f in fields] for row in given]
        with db.wrap_database_errors:
            db.ensure_connection()
            _insert_sqlite(db.connection, table, columns, values)
        return
    lines = [
        "\t".join([_copy_value(f, row[f.attname], db) for f in fields]) + "\n" for row in given
    ]
    # The driver's own cursor (Django's wrapper has no COPY), its errors given Django's classes.
    with (
        db.cursor() as cursor,
        db.wrap_database_errors,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
    ):
        copy.write("".join(lines).encode())


def _copy_value(field: Any, value: Any, db: Any) -> str:
    if isinstance(field, JSONField):
        if isinstance(value, Value):  # Value(None, JSONField()): JSON's null, not SQL's NULL
            value = value.value
        elif value is None:
            return _NULL
        # JSON holds no raw tab, CR or LF: only its escapes' backslashes need escaping.
        return json.dumps(value, cls=field.encoder).replace("\\", "\\\\")
    if value is None:
        return _NULL
    value = field.get_db_prep_save(value, db)
    if value is None:
        return _NULL
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int | float | str):
        return copy_text(str(value))
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} in {field.name}: no COPY text for it here")


def _sqlite_value(field: Any, value: Any, db: Any) -> Any:
    if hasattr(value, "resolve_expression"):  # bulk_create would compile it; here only JSON's
        if not (isinstance(field, JSONField) and isinstance(value, Value)):
            raise TypeError(f"{type(value).__name__} in {field.name}: an expression, not a value")
        if value.value is not None:
            value = value.value  # Value(None, JSONField()) stays: the field writes JSON's null
    return field.get_db_prep_save(value, db)


# SQLite's rows go in by multi-row INSERTs of a power-of-two size, so that a connection prepares
# a few statements once and keeps them in its statement cache (chats.live.event_log writes its
# rows the same way, and says why).
SQLITE_ROWS = 1024


def sqlite_row_chunks(
    raw: sqlite3.Connection, rows: Sequence[Sequence[Any]], leading: Sequence[Any] = ()
) -> Iterator[tuple[int, list[Any]]]:
    """The rows as the INSERTs that write them take them: (how many rows, the statement's values
    in one list, `leading` first), as many rows a statement as SQLite's limit on its variables
    allows (999 before 3.32), at most SQLITE_ROWS, a power of two each."""
    if not rows:
        return
    variables = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - len(leading)
    most = min(SQLITE_ROWS, max(1, variables // len(rows[0])))
    largest = 1 << (most.bit_length() - 1)
    start = 0
    while start < len(rows):
        size = min(largest, 1 << ((len(rows) - start).bit_length() - 1))
        yield size, [*leading, *chain.from_iterable(rows[start : start + size])]
        start += size


def _insert_sqlite(
    raw: sqlite3.Connection, table: str, columns: str, rows: list[list[Any]]
) -> None:
    width = len(rows[0])
    for size, values in sqlite_row_chunks(raw, rows):
        raw.execute(_sqlite_insert(table, columns, width, size), values)


@functools.lru_cache(maxsize=64)
def _sqlite_insert(table: str, columns: str, width: int, size: int) -> str:
    row = "(" + ",".join(["?"] * width) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES {','.join([row] * size)}"  # noqa: S608
