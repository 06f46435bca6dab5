"""DatabaseBatches: items waiting together go in one trip; one item's failure stays its own."""

from __future__ import annotations

import asyncio

import pytest

from chats.loop.batches import MAX_BATCH, DatabaseBatches, one_each

# The batches run on the database thread, which checks its connection before each call.
pytestmark = pytest.mark.django_db


class Refused(Exception):
    pass


def doubling(calls: list[list[int]], refuse: int | None = None):
    """A batch function that records its batches and refuses any batch holding `refuse`."""

    def run(items: list[int]) -> list[int | Exception]:
        calls.append(list(items))
        if refuse in items:
            raise Refused(f"refused {refuse}")
        return [item * 2 for item in items]

    return run


async def test_items_submitted_together_go_in_one_trip_after_the_first():
    calls: list[list[int]] = []
    batches = DatabaseBatches(doubling(calls), name="test")
    results = await asyncio.gather(*(batches.submit(i) for i in range(10)))
    assert results == [i * 2 for i in range(10)]
    assert calls == [list(range(10))]  # all waiting when the thread came free


async def test_a_burst_goes_in_batches_of_at_most_max_batch():
    calls: list[list[int]] = []
    batches = DatabaseBatches(doubling(calls), name="test")
    count = MAX_BATCH * 2 + 1
    assert await asyncio.gather(*(batches.submit(i) for i in range(count))) == [
        i * 2 for i in range(count)
    ]
    assert [len(c) for c in calls] == [MAX_BATCH, MAX_BATCH, 1]


async def test_a_refused_batch_is_tried_item_by_item_and_only_the_refused_item_fails():
    calls: list[list[int]] = []
    batches = DatabaseBatches(doubling(calls, refuse=3), name="test")
    outcomes = await asyncio.gather(*(batches.submit(i) for i in range(5)), return_exceptions=True)
    assert outcomes[:3] == [0, 2, 4] and outcomes[4] == 8
    assert isinstance(outcomes[3], Refused)
    assert calls == [[0, 1, 2, 3, 4], [0], [1], [2], [3], [4]]


async def test_a_failing_database_fails_the_batch_at_once_without_trying_each_alone():
    from django.db import OperationalError

    calls: list[list[int]] = []

    def locked(items: list[int]) -> list[int]:
        calls.append(list(items))
        raise OperationalError("database is locked")

    batches = DatabaseBatches(locked, name="test")
    outcomes = await asyncio.gather(*(batches.submit(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(o, OperationalError) for o in outcomes)
    assert calls == [[0, 1, 2]]


async def test_an_outcome_that_is_an_exception_is_raised_to_its_caller_alone():
    batches = DatabaseBatches(
        lambda items: [Refused("no") if i == 1 else i for i in items], name="test"
    )
    outcomes = await asyncio.gather(*(batches.submit(i) for i in range(3)), return_exceptions=True)
    assert outcomes[0] == 0 and outcomes[2] == 2
    assert isinstance(outcomes[1], Refused)


async def test_then_follows_up_the_batch_even_when_a_caller_has_gone():
    followed: list[list[int]] = []

    async def then(results: list[int]) -> None:
        followed.append(results)

    batches = DatabaseBatches(doubling([]), name="test", then=then)
    leaving = asyncio.create_task(batches.submit(5))
    staying = asyncio.create_task(batches.submit(6))
    await asyncio.sleep(0)
    leaving.cancel()
    assert await staying == 12
    await batches.close()
    assert followed == [[10, 12]]  # once for the batch, the gone caller's result included
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def test_a_failing_follow_up_still_gives_each_caller_its_result():
    async def then(results: list[int]) -> None:
        raise RuntimeError("Redis is away")

    batches = DatabaseBatches(doubling([]), name="test", then=then)
    assert await asyncio.gather(batches.submit(1), batches.submit(2)) == [2, 4]


async def test_close_waits_for_what_was_submitted():
    calls: list[list[int]] = []
    batches = DatabaseBatches(doubling(calls), name="test")
    pending = [asyncio.create_task(batches.submit(i)) for i in range(3)]
    await asyncio.sleep(0)
    await batches.close()
    assert batches.closed
    assert all(task.done() for task in pending)
    assert calls == [[0, 1, 2]]


async def test_a_background_batch_waits_until_the_foreground_batches_are_done():
    """Storing the checks of answers already shown waits while answers are being finished."""
    import threading

    order: list[str] = []
    release = threading.Event()

    def finishing(items: list[int]) -> list[int]:
        release.wait(10)  # the database thread is busy with the finishes
        order.append(f"finish {items}")
        return items

    def checking(items: list[int]) -> list[int]:
        order.append(f"check {items}")
        return items

    finishes = DatabaseBatches(finishing, name="finish")
    checks = DatabaseBatches(checking, name="check", background=True)
    first = asyncio.create_task(finishes.submit(1))
    await asyncio.sleep(0)  # its trip is on the database thread
    later = asyncio.create_task(finishes.submit(2))  # waits for the next trip
    check = asyncio.create_task(checks.submit(9))
    for _ in range(5):
        await asyncio.sleep(0)
    release.set()

    assert await asyncio.gather(first, later, check) == [1, 2, 9]
    assert order == ["finish [1]", "finish [2]", "check [9]"]


async def test_a_background_batch_goes_alone_at_once():
    calls: list[list[int]] = []
    batches = DatabaseBatches(doubling(calls), name="test", background=True)
    assert await batches.submit(4) == 8
    assert calls == [[4]]


def test_one_each_hands_an_object_out_once_and_copies_it_after():
    class Row:
        def __init__(self, name):
            self.name = name

    first, second = Row("a"), Row("b")
    owned = one_each([first, None, second, first, first])
    assert owned[0] is first and owned[1] is None and owned[2] is second
    assert owned[3] is not first and owned[4] is not first and owned[3] is not owned[4]
    assert [row.name for row in owned if row is not None] == ["a", "b", "a", "a"]
    owned[3].name = "changed"
    assert first.name == "a"  # the copy is the second waiter's own
