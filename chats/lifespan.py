"""ASGI lifespan: recover turns orphaned by a dead process at start-up, end runs at shutdown."""

from __future__ import annotations

import logging

from .runner import get_registry, sweep_orphans

logger = logging.getLogger(__name__)


async def lifespan_app(scope, receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await sweep_orphans()
                get_registry().ensure_heartbeat()
            except Exception as error:
                logger.exception("Start-up recovery failed")
                await send({"type": "lifespan.startup.failed", "message": str(error)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await get_registry().shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
