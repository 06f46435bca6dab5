"""The process's one thread for CPU work that must not hold up the event loop or the database
thread: rendering a finished answer, placing a chart, checking an answer against its pages.

That work is CPU only and grows with its input: on the event loop it would hold up every
stream's frames (300 charts arriving together took 0.6 s), and on the database thread every ask
and finish queued behind it. Here it runs one piece at a time, so a heavy answer delays only
itself. The thread still shares the GIL, which Python hands back to the event loop every switch
interval (`GIL_SWITCH_INTERVAL`, researchsite/asgi.py).

Work someone waits for (an answer to show) goes before work that can wait (`later=True`: the
figure check of an answer already shown): when 200 answers end together, their checks would
otherwise sit in the queue between their finishes.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpu-work")
_Work = tuple[Future, Callable[[], Any]]
_now: deque[_Work] = deque()
_later: deque[_Work] = deque()


async def on_cpu_thread(
    function: Callable[..., T], /, *args: Any, later: bool = False, **kwargs: Any
) -> T:
    """`function(*args, **kwargs)` on the process's one CPU thread (no database there); after
    all the work not marked `later` that is waiting, when `later`."""
    future: Future[T] = Future()
    (_later if later else _now).append((future, functools.partial(function, *args, **kwargs)))
    _thread.submit(_run_next)  # one run per piece of work: it takes the most urgent waiting
    return await asyncio.wrap_future(future)


def _run_next() -> None:
    future, work = (_now or _later).popleft()
    if not future.set_running_or_notify_cancel():  # its caller has gone
        return
    try:
        future.set_result(work())
    except BaseException as error:  # the caller's to handle, as run_in_executor gives it
        future.set_exception(error)
