"""What a log line is about (a turn, a request), carried by the task that does the work.

A run binds its turn's ids once, as it begins; every line logged by that task, and by the tasks
it starts, then carries them (researchsite/logs.py adds them to each record). Context
variables follow asyncio tasks, so two runs in one process never see each other's fields. A
request binds its id for as long as it is served (`log_context_bound`), and takes it off after:
a sync request's thread serves the next request in the same context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from contextvars import Context, ContextVar
from typing import Any

LOG_FIELDS = ("chat_id", "turn_id", "user_id", "agent", "request_id")

_context: ContextVar[dict[str, Any]] = ContextVar("log_context", default={})  # noqa: B039


def bind_log_context(**fields: Any) -> None:
    """Add these fields to every line this task (and the tasks it starts) logs from now on."""
    _context.set({**_context.get(), **fields})


@contextmanager
def log_context_bound(**fields: Any) -> Iterator[None]:
    """Add these fields to the lines logged in the block, then restore what was bound before."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


@contextmanager
def log_context_cleared() -> Iterator[None]:
    """Run the block with no log context, then restore what was bound before it."""
    token = _context.set({})
    try:
        yield
    finally:
        _context.reset(token)


def log_context() -> dict[str, Any]:
    return _context.get()


def shared_task(coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task:
    """Start a task that works for every turn (a flusher, a publisher, a batch worker) with no
    log context: started by whichever run needed it first, it must not log as that run."""
    return asyncio.create_task(coro, name=name, context=Context())
