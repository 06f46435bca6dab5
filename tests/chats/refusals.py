"""Make the test database refuse some writes, as a real database refuses what it cannot store.

A trigger, on SQLite or PostgreSQL, rejects rows of `table` whose `column` contains `marker`:
the code under test meets a genuine database error, with no mock of our own code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def refusing(
    table: str, column: str, marker: str, when: str = "INSERT", *, transient: bool = False
) -> Iterator[None]:
    """Refuse while inside; `transient` (PostgreSQL) refuses as a serialization failure."""
    name = f"refuse_{table}_{when.lower()}"
    errcode = " USING ERRCODE = '40001'" if transient else ""
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN"
                f" IF NEW.{column}::text LIKE '%{marker}%' THEN"
                f" RAISE EXCEPTION 'refused by the test'{errcode}; END IF; RETURN NEW; END $$"
                " LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE {when} ON {table}"
                f" FOR EACH ROW EXECUTE FUNCTION {name}()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE {when} ON {table}"
                f" WHEN NEW.{column} LIKE '%{marker}%'"
                " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if postgres:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
            else:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")


def refusals_fixture() -> Iterator[Callable[..., None]]:
    """Body of a `refuse_rows` fixture: install refusals; all are removed at teardown."""
    installed = []

    def install(table: str, column: str, marker: str, when: str = "INSERT") -> None:
        context = refusing(table, column, marker, when)
        context.__enter__()
        installed.append(context)

    yield install
    for context in reversed(installed):
        context.__exit__(None, None, None)
