"""The channel layer of a single process (no REDIS_URL): channels' in-memory layer, swept less.

channels' `InMemoryChannelLayer` walks every channel and every group membership for expired
entries on each `receive` and `group_send`. Every open page waits on a channel of its own and
belongs to its user's groups, so with 200 pages open each receive walked hundreds of entries, a
share of the event loop's time that showed under load (docs/PERFORMANCE.md, "Channels'
per-message wrappers skipped"). Expiry is housekeeping (messages nobody received within
`expiry`, memberships older than a day), so once a second is soon enough.
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
