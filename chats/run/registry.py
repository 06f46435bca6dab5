"""The runs of a process: keep their tasks alive, pass on stop requests, renew their leases,
sweep the turns of dead processes.

Stop requests reach a run through the channel layer (the run may live in another process): each
process that runs turns has one listener in one group, and a request names its turn. A lease
renewed by `RunRegistry` lets any process tell when the run's own process died.
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chats.agent.request import AgentRequest
from chats.live.protocol import publish, stop_requests_group, turn_stop
from chats.log_context import bind_log_context, shared_task
from chats.loop.per_loop import PerLoop
from chats.metrics import STREAMING_TURNS, TURNS_STARTED
from chats.models import Turn
from chats.run.finishes import announce_finished, finish_orphans
from chats.run.turn_run import TurnRun
from chats.services import turn_renew_leases

logger = logging.getLogger(__name__)

LISTENER_CLOSE = "turn.listener.close"


class StopListener:
    """This process's one listener in the stop requests' group (`stop_requests_group`): a
    request names its turn, and this process's run of it, if any, is stopped."""

    def __init__(self, runs: dict[int, TurnRun]) -> None:
        self.runs = runs  # the registry's
        self.task: asyncio.Task | None = None
        # Its channel once it is in the group (None if it could not join).
        self._channel: asyncio.Future[str | None] | None = None

    async def listening(self) -> None:
        """Return once the listener is in the group (started by the first run, and again if it
        has ended). A listener that cannot join is logged and the runs carry on; the heartbeat
        starts another (`keep`)."""
        await asyncio.shield(self._started())

    def _started(self) -> asyncio.Future[str | None]:
        """The running listener's channel, to come; a listener is started if none runs."""
        if self.task is None or self.task.done():
            self._channel = asyncio.get_running_loop().create_future()
            self.task = shared_task(self._listen(self._channel), name="turn-stop-listener")
        assert self._channel is not None
        return self._channel

    async def _listen(self, joined: asyncio.Future[str | None]) -> None:
        layer = get_channel_layer()
        try:
            channel = await layer.new_channel()
            await layer.group_add(stop_requests_group(), channel)
        except Exception:
            joined.set_result(None)
            logger.warning("This process cannot hear stop requests", exc_info=True)
            return
        joined.set_result(channel)
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == LISTENER_CLOSE:
                    return
                if message.get("type") == "turn.stop":
                    run = self.runs.get(message.get("turn_id"))  # None: not this process's
                    if run is not None and run.task is not None and not run.stop_requested:
                        run.stop_requested = True
                        run.task.cancel()
        except asyncio.CancelledError:
            raise
        except Exception:  # the layer failed (Redis restarting): the heartbeat starts another
            logger.warning("The stop listener ended", exc_info=True)

    def channel(self) -> str | None:
        """The listener's channel while it listens in the group, else None."""
        listening = self.task is not None and not self.task.done()
        if not listening or self._channel is None or not self._channel.done():
            return None
        return self._channel.result()

    async def keep(self) -> None:
        """Keep the listener in its group while runs stream (the heartbeat's): the channel
        layer forgets a member after the group's expiry (a day by default) unless it is added
        again, and a listener the layer failed (Redis restarting) is started again."""
        if (channel := self.channel()) is not None:
            await get_channel_layer().group_add(stop_requests_group(), channel)
        elif self.runs:
            self._started()  # not awaited: the leases must not wait for Redis

    async def close(self) -> None:
        """Ask the listener to return rather than cancel it: channels_redis reads every channel
        of a process in one shared receive, and cancelling it mid-read drops a message that was
        meant for another channel, such as a page's turn.finished."""
        if (channel := self.channel()) is None:
            return
        layer = get_channel_layer()
        await layer.group_discard(stop_requests_group(), channel)
        await layer.send(channel, {"type": LISTENER_CLOSE})
        assert self.task is not None
        await asyncio.wait([self.task], timeout=5)


class RunRegistry:
    """The runs of this process: keeps their tasks alive, renews their leases, sweeps orphans."""

    def __init__(self) -> None:
        self.runs: dict[int, TurnRun] = {}
        self._heartbeat: asyncio.Task | None = None
        self.stops = StopListener(self.runs)

    async def start(
        self,
        turn: Turn,
        request: AgentRequest,
        *,
        siblings: list[int] | None = None,
    ) -> TurnRun:
        run = TurnRun(turn, request)
        run.siblings = siblings
        self.runs[run.turn_id] = run
        TURNS_STARTED.labels(agent=run.agent).inc()
        run.task = asyncio.create_task(self._run_in_context(run), name=f"turn-{run.turn_id}")
        self.ensure_heartbeat()
        return run

    async def _run_in_context(self, run: TurnRun) -> None:
        """The run's task: every line it logs names its turn; the streaming gauge counts it."""
        bind_log_context(
            chat_id=run.chat_id, turn_id=run.turn_id, user_id=run.user_id, agent=run.agent
        )
        logger.info("Turn %s started (%s)", run.turn_id, run.agent)
        STREAMING_TURNS.inc()
        try:
            await self._supervise(run)
        finally:
            STREAMING_TURNS.dec()

    async def _supervise(self, run: TurnRun) -> None:
        try:
            # Its page may ask to stop it as soon as it shows the turn.
            await self.stops.listening()
            await run.run()
        finally:
            self.runs.pop(run.turn_id, None)

    def ensure_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = shared_task(self._beat(), name="turn-heartbeat")

    async def _beat(self) -> None:
        while True:
            try:
                if self.runs:
                    await database_sync_to_async(turn_renew_leases)(turn_ids=list(self.runs))
            except Exception:
                logger.exception("Renewing the leases of running turns failed")
            try:
                async with asyncio.timeout(settings.TURN_HEARTBEAT_SECONDS):  # leases come first
                    await self.stops.keep()
            except Exception:
                logger.exception("Keeping the stop listener in its group failed")
            try:
                await sweep_orphans()
            except Exception:
                logger.exception("Sweeping orphaned turns failed")
            await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)

    async def wait_idle(self) -> None:
        """Return once no run is left (each ends by itself: see chats/run/draining.py)."""
        while self.runs:
            tasks = {run.task for run in self.runs.values() if run.task is not None}
            if not tasks:
                return
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    async def shutdown(self) -> None:
        """Cancel this process's runs; each records itself interrupted before it ends."""
        runs = list(self.runs.values())
        for run in runs:
            if run.task is not None and not run.finishing:  # a finishing one is storing itself
                run.task.cancel()
        await asyncio.gather(*(run.task for run in runs if run.task), return_exceptions=True)
        # A run cancelled before it began (asked for a moment before) recorded nothing: its
        # turn must not stay "streaming" until another process sweeps it.
        for run in runs:
            if not run.began:
                await run.end_unbegun()
                self.runs.pop(run.turn_id, None)
        if self._heartbeat:
            self._heartbeat.cancel()
        await self.stops.close()


async def sweep_orphans() -> None:
    """End the turns of dead processes; announced, indexed and checked as any finished turn
    (the search queue's catch-up passes leave chats alone while they stream)."""
    await announce_finished(await database_sync_to_async(finish_orphans)())


async def run_ended(turn_id: int) -> None:
    """Return once this process's run of the turn has ended and its turn is stored (at once when
    no run of it is here: it has ended, or runs in another process)."""
    run = get_registry().runs.get(turn_id)
    if run is not None and run.task is not None:
        await asyncio.wait([run.task])


async def request_stop(turn_id: int) -> None:
    """Ask the run of `turn_id`, in whichever process it lives, to stop."""
    await publish(stop_requests_group(), turn_stop(turn_id))


get_registry = PerLoop(RunRegistry)  # this event loop's runs
