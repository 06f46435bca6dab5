"""The process's one thread for CPU work that must not hold up the event loop or the database
thread: rendering a finished answer, placing a chart, checking an answer against its pages.

That work is CPU only and grows with its input: on the event loop it would hold up every
stream's frames (300 charts arriving together took 0.6 s), and on the database thread every ask
and finish queued behind it. Here it runs one piece at a time, so a heavy answer delays only
itself. The thread still shares the GIL, which Python hands back to the event loop every switch
interval (`GIL_SWITCH_INTERVAL`, researchsite/asgi.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpu-work")


async def on_cpu_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` on the process's one CPU thread (no database there)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_thread, functools.partial(function, *args, **kwargs))
