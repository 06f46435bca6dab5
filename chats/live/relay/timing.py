"""How long the Redis relay waits, in one place (read at each use, so a test may shorten them)."""

RECONNECT_DELAY = 0.5  # seconds between attempts after Redis went away or refused
JOIN_TIMEOUT = 5.0  # seconds a page's join waits for Redis to list its process
PUBLISH_TIMEOUT = 5.0  # seconds Redis has to take one tick's frames, or one pass of listings
# A process's listing of a chat lasts LISTEN_LEASE seconds, renewed every LISTEN_RENEW: the
# listings of a process that died lapse on their own. A quiet inbox is PINGed as often.
LISTEN_LEASE = 60
LISTEN_RENEW = 20.0
