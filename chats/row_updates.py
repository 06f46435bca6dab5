"""Many rows of one table changed at once: one UPDATE ... FROM (VALUES ...) statement.

A batch of turns that start or finish together changes each turn's row and each chat's. One
`save` or `update` per row would be a statement each, compiled by Django's query compiler and,
on PostgreSQL, a round trip each, while every other ask and finish waits on the database
thread; Django's `bulk_update` writes one CASE per field and row, three times as much to
compile. Here each object's values are one row of a VALUES list, adapted by their fields as
`save` adapts them, joined to the table by primary key (PostgreSQL, and SQLite since 3.33):
docs/PERFORMANCE.md, "Bursts go to the database together".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Model

# Rows per statement: within SQLite's default of 32,766 variables (and 999 of older builds, at
# the 16 columns of a finished turn) and far within PostgreSQL's 65,535.
ROWS_PER_STATEMENT = 60


def update_rows(objs: Sequence[Model], fields: Sequence[str]) -> None:
    """Write `fields` of every object in `objs` (all of one model, all saved) to its row."""
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    db = connections[router.db_for_write(model)]
    pk = meta.pk
    columns = [pk, *(meta.get_field(name) for name in fields)]
    quote = db.ops.quote_name
    names = [f"c{i}" for i in range(len(columns))]
    taken = [_taken(db, f, f"v.{n}") for n, f in zip(names, columns, strict=True)]
    assignments = ", ".join(
        f"{quote(f.column)} = {value}" for f, value in zip(columns[1:], taken[1:], strict=True)
    )
    table = quote(meta.db_table)
    where = f"{table}.{quote(pk.column)} = {taken[0]}"
    for start in range(0, len(objs), ROWS_PER_STATEMENT):
        chunk = objs[start : start + ROWS_PER_STATEMENT]
        row = "(" + ", ".join(["%s"] * len(columns)) + ")"
        params: list[Any] = []
        for obj in chunk:
            params.extend(
                field.get_db_prep_save(getattr(obj, field.attname), db) for field in columns
            )
        sql = (
            f"WITH v({', '.join(names)}) AS (VALUES {', '.join([row] * len(chunk))})"  # noqa: S608
            f" UPDATE {table} SET {assignments} FROM v WHERE {where}"
        )
        with db.cursor() as cursor:
            cursor.execute(sql, params)


# Text goes in as text, so a value longer than its column is refused as an UPDATE of the column
# refuses it (a cast to varchar(n) would cut it short).
_TEXT_TYPES = frozenset({"CharField", "TextField", "SlugField", "EmailField", "URLField"})


def _taken(db: Any, field: Any, column: str) -> str:
    """A VALUES column as the field's type: on PostgreSQL a column of NULLs is text, which a
    timestamp or JSON column does not take without a cast."""
    if db.vendor != "postgresql" or field.get_internal_type() in _TEXT_TYPES:
        return column
    return f"CAST({column} AS {field.db_type(db)})"
