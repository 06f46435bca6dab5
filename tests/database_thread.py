"""What the process's one database thread does while a test awaits the site's work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from django.db import connection

from chats.loop.database_thread import on_database_thread


async def database_thread_queries(work: Callable[[], Awaitable[object]]) -> list[str]:
    """The SQL the process's database thread ran while `work()` was awaited."""

    def begin() -> None:
        connection.ensure_connection()
        connection.force_debug_cursor = True
        connection.queries_log.clear()

    def end() -> list[str]:
        connection.force_debug_cursor = False
        return [query["sql"] for query in connection.queries]

    await on_database_thread(begin)
    try:
        await work()
    finally:
        queries = await on_database_thread(end)
    return queries
