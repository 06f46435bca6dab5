"""The CPU thread: one piece of work at a time, work someone waits for before work that can wait."""

from __future__ import annotations

import asyncio
import threading

from chats.loop.cpu_thread import on_cpu_thread


async def test_waiting_work_goes_before_later_work_queued_first():
    held, order = threading.Event(), []
    busy = asyncio.create_task(on_cpu_thread(held.wait, 10))
    check = asyncio.create_task(on_cpu_thread(order.append, "check", later=True))
    answer = asyncio.create_task(on_cpu_thread(order.append, "answer"))
    await asyncio.sleep(0)
    held.set()
    await asyncio.gather(busy, check, answer)
    assert order == ["answer", "check"]


async def test_an_error_reaches_its_caller_and_the_thread_goes_on():
    def failing() -> None:
        raise ValueError("bad answer")

    try:
        await on_cpu_thread(failing)
    except ValueError as error:
        assert str(error) == "bad answer"
    else:
        raise AssertionError("the error was lost")
    assert await on_cpu_thread(sum, [1, 2, 3]) == 6


async def test_work_whose_caller_left_is_not_run():
    held, ran = threading.Event(), []
    busy = asyncio.create_task(on_cpu_thread(held.wait, 10))
    gone = asyncio.create_task(on_cpu_thread(ran.append, "gone"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    held.set()
    await busy
    assert await on_cpu_thread(ran.append, "next") is None
    assert ran == ["next"]
