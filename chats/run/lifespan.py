"""ASGI lifespan: at start-up, recover turns orphaned by a dead process and queue the chats it
left unindexed for search (looking again every few minutes while serving); at shutdown, let
running turns finish (chats/run/draining.py), end what is left, and leave nothing behind (no
pending write, indexing pass, Redis listing, subscription or connection). The workers the site
runs beside its pages (the watches' task worker) are handed over by the composition root
(`researchsite/asgi.py`): this module knows none of them.

Start-up needs no database: a process whose database is down starts, answers /healthz, reports
it on /readyz, and recovers by itself (the heartbeat sweeps and the search queue catches up
again while serving)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections

from chats.agent import close_http_sessions
from chats.agent.providers import preload_sdks
from chats.library.search import get_search_index_queue
from chats.live.event_log import get_event_log
from chats.live.relay import close_relay
from chats.metrics import forget_this_process
from chats.run.asks import get_ask_batches
from chats.run.draining import drain
from chats.run.finishes import get_finish_batches
from chats.run.registry import get_registry, sweep_orphans
from chats.verify.check import stop_source_checks
from chats.verify.readers import page_readers

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Worker:
    """Work the process runs beside its pages while it serves: started once start-up has
    recovered, stopped once the runs have ended."""

    start: Callable[[], None]
    stop: Callable[[], Awaitable[None]]


async def lifespan_app(scope, receive, send, *, workers: Sequence[Worker] = ()) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            # Recovery is a courtesy, not a condition of serving: a turn that cannot be
            # recovered (or a database still starting) must not keep the site down. The
            # heartbeat sweeps again every TURN_HEARTBEAT_SECONDS.
            try:
                await sweep_orphans()
            except Exception:
                logger.exception("Start-up recovery of orphaned turns failed; serving anyway")
            search_index = get_search_index_queue()
            try:  # chats a process that died had queued for the search index
                await search_index.catch_up()
            except Exception:
                logger.exception("Looking for chats due for the search index failed")
            search_index.keep_catching_up()  # and a batch that fails while serving
            get_registry().ensure_heartbeat()
            try:
                await asyncio.to_thread(preload_sdks)
            except Exception:
                logger.exception("Loading a provider's SDK failed; it will load on first use")
            for worker in workers:
                worker.start()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shut_down(workers)
            await asyncio.to_thread(page_readers().close)  # the helpers reading cited pages
            await send({"type": "lifespan.shutdown.complete"})
            return


async def shut_down(workers: Sequence[Worker] = ()) -> None:
    """End this process's runs, then finish the work they left, in the order it depends on."""
    registry = get_registry()

    async def drain_runs() -> None:
        await drain(registry, grace=settings.SHUTDOWN_GRACE_SECONDS)

    steps = [
        get_ask_batches().close,  # asks being started become runs; no new ones start
        drain_runs,  # running turns finish, up to SHUTDOWN_GRACE_SECONDS
        registry.shutdown,  # what is left records itself interrupted and flushes its events
        *(worker.stop for worker in workers),  # their runs have ended with the others
        get_finish_batches().close,  # what the runs stored is announced
        stop_source_checks,  # pages still being read count as unread
        get_event_log().close,
        get_search_index_queue().drain,
        close_http_sessions,  # every run has ended: their connections are idle
        close_relay,
        database_sync_to_async(connections.close_all),  # the shared database thread's
        forget_this_process,
    ]
    for step in steps:
        try:
            await step()
        except Exception:  # one failed step (say Redis gone) must not skip the others
            logger.exception("Shutting down: %s failed", getattr(step, "__qualname__", step))
