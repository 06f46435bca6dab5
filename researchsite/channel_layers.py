"""The channel layer of a single process (no REDIS_URL): channels' in-memory layer, swept less.

channels' `InMemoryChannelLayer` walks every channel and every group membership for expired
entries on each `receive` and `group_send`. Each streaming run waits for a stop request on a
channel of its own (`chats.run.registry.RunRegistry`), so 200 runs starting together made 200 walks
over ~800 entries: ~0.8 ms each, ~5% of the event loop's time under that load
(docs/PERFORMANCE.md, "Channels' per-message wrappers skipped"). Expiry is housekeeping (messages
nobody received within `expiry`, memberships older than a day), so once a second is soon enough.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    sweep_interval = 1.0  # seconds between walks for expired messages and memberships

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_interval
        super()._clean_expired()
