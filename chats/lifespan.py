"""ASGI lifespan: recover turns orphaned by a dead process at start-up, end runs at shutdown."""

from __future__ import annotations

import asyncio
import logging

from .agent.providers import preload_sdks
from .runner import get_registry, sweep_orphans

logger = logging.getLogger(__name__)


async def lifespan_app(scope, receive, send) -> None:
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
            get_registry().ensure_heartbeat()
            try:
                await asyncio.to_thread(preload_sdks)
            except Exception:
                logger.exception("Loading a provider's SDK failed; it will load on first use")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await get_registry().shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
