"""Webhooks: a user's endpoints, and the events sent to them, signed by the Standard Webhooks
scheme and retried with backoff on the site's task queue (django-tasks, as the watches use).

- `models`: endpoints (URL, events, signing secret), deliveries (one per event and endpoint:
  status, attempts, last error), and the turns that asked for `turn.finished`.
- `services`: add or delete an endpoint (its URL checked under the address rules of
  `chats/outbound.py` with WEBHOOK_ALLOWED_HOSTS), ask for a turn's `turn.finished`, and record
  an event's deliveries: `turn.finished` as a finish is stored (`chats.services`), in its
  transaction; `watch.changed` as a watch run is recorded (`chats.watch.runs`).
- `tasks`: one delivery attempt, signed (`standardwebhooks`), over `chats.outbound`'s guarded
  client; a failed one is queued again after WEBHOOK_RETRY_SECONDS.
- `selectors`: a user's endpoints and their recent deliveries.

Below the run and the watches, which send its events; the API and its page manage endpoints.
"""
