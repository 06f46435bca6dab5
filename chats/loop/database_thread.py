"""The process's one database thread, for the database work of requests that should not get
a thread, and a connection, of their own.

`channels.db.database_sync_to_async` runs a function on the thread of the context it is called
in. A websocket consumer's calls, the ask and finish batches' and the site's own tasks' share
one: the process's database thread, whose connection is kept (CONN_MAX_AGE). A Django
request's calls get a thread made for that request (asgiref's ThreadSensitiveContext), which
opens a connection of its own each time and keeps it as long as the request lasts: for an API
event stream, as long as its turn streams; for any API request, a connection opened and set
up (on SQLite its PRAGMAs) for one or two queries. `on_database_thread` runs the call where the
consumers' run, so an API request costs the database what a page's frame costs.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from channels.db import database_sync_to_async

T = TypeVar("T")


async def on_database_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` on the process's one database thread (its own context)."""
    call = database_sync_to_async(function)(*args, **kwargs)
    return await asyncio.create_task(call, context=contextvars.Context())
