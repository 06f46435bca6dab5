"""A histogram recorded once per turn of the event loop exposes what one observe per value would."""

import asyncio

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from chats.metrics import DELAY_BUCKETS, ObservedPerLoopTurn

VALUES = [0.0, 0.001, 0.005, 0.0051, 0.03, 0.1, 0.2, 7.5, 10.0, 12.0, 0.004, 0.03]


def histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram("delay_seconds", "Delay.", buckets=DELAY_BUCKETS, registry=registry)


def test_values_observed_in_one_turn_of_the_loop_are_exposed_as_if_observed_one_by_one():
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    expected = histogram(one_by_one)
    for value in VALUES:
        expected.observe(value)
    observed = ObservedPerLoopTurn(histogram(batched))

    async def deliver() -> bytes:
        for value in VALUES[:5]:
            observed.observe(value)
        before = generate_latest(batched)
        await asyncio.sleep(0)  # the turn ends: recorded
        for value in VALUES[5:]:
            observed.observe(value)
        await asyncio.sleep(0)
        return before

    before = asyncio.run(deliver())
    assert b"delay_seconds_count 0.0" in before
    assert exposed(batched) == exposed(one_by_one)


def exposed(registry: CollectorRegistry) -> list[bytes]:
    """The samples, but the time each histogram was made."""
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def test_a_value_observed_outside_a_loop_or_left_by_a_closed_one_is_recorded():
    registry = CollectorRegistry()
    observed = ObservedPerLoopTurn(histogram(registry))
    observed.observe(0.5)  # no loop
    loop = asyncio.new_event_loop()

    def observe_and_stop() -> None:
        observed.observe(0.01)  # its record is due in the next turn, which never comes
        loop.stop()

    loop.call_soon(observe_and_stop)
    loop.run_forever()
    loop.close()
    assert registry.get_sample_value("delay_seconds_count") == 1

    async def later() -> None:
        observed.observe(0.02)
        await asyncio.sleep(0)

    asyncio.run(later())
    assert registry.get_sample_value("delay_seconds_count") == 3
    assert registry.get_sample_value("delay_seconds_bucket", {"le": "0.025"}) == 2
