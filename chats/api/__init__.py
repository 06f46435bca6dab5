"""ResearchSite from code: API tokens, the JSON API under /api/v1/ (django-ninja), a turn's live
event stream, and the MCP server at /mcp. docs/API.md describes them.

- `models`, `services`, `selectors`: API tokens (stored hashed, shown once, scopes `read` and
  `ask`, expiry, revocation, last use).
- `auth`: the bearer token of a request, its scopes, and its rate (the page's frame rate).
- `views`, `schemas`, `errors`: the endpoints, their typed input and output, and every error as
  `{"detail": "..."}`; `turns`: what a turn's JSON holds.
- `stream`: `GET /api/v1/turns/{id}/events`, a follower of the turn's chat as a page is
  (`chats/live/follow.py`).
- `mcp`: the MCP server (`research`, `search_chats`), mounted by researchsite/asgi.py.
- `pages`: the "API tokens" page (tokens and webhooks, for the signed-in user).

Every turn the API starts goes through `chats.run.asks.ask_start`, as the page's do; every read
uses the selectors the pages use, so a user sees through a token exactly what their pages show.
"""
