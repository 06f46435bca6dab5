"""Rendering a finished answer (citations, HTML, chart placement) on a thread of its own.

That work is CPU only and grows with the answer: on the event loop it would hold up every
stream's frames, and on the database thread every ask and finish queued behind it. Here it runs
before the finish is queued for the database (`chats.run.batches`), one answer at a time, so a
heavy answer delays only its own finish. The thread still shares the GIL, which Python hands
back to the event loop every switch interval (`GIL_SWITCH_INTERVAL`, researchsite/asgi.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor

from chats.services import TurnEnd, turn_render_end

_render_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="answer-render")


async def rendered(end: TurnEnd) -> TurnEnd:
    """The end with its answer rendered (`TurnEnd.rendered`), computed off the event loop."""
    loop = asyncio.get_running_loop()
    return dataclasses.replace(
        end, rendered=await loop.run_in_executor(_render_thread, turn_render_end, end)
    )
