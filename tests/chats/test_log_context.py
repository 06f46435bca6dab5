"""A run's log context follows its task, and never the shared tasks it happens to start."""

from __future__ import annotations

import asyncio

from chats.log_context import bind_log_context, log_context, shared_task


async def test_a_tasks_context_reaches_its_children_but_not_shared_tasks():
    seen = {}

    async def child():
        seen["child"] = log_context()

    async def shared():
        seen["shared"] = log_context()

    async def run():
        bind_log_context(turn_id=7, chat_id=3)
        await asyncio.create_task(child())
        await shared_task(shared(), name="shared")

    async def other_run():
        seen["other"] = log_context()

    await asyncio.gather(asyncio.create_task(run()), asyncio.create_task(other_run()))
    assert seen == {"child": {"turn_id": 7, "chat_id": 3}, "shared": {}, "other": {}}
    assert log_context() == {}
