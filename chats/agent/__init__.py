"""The edge: the one part of the site that talks to the agents and reads their wire formats.

What it offers the rest of the site:

- **Opening a turn's stream**: `chats.agent.providers.open_stream` opens the chat's agent for one
  request (`chats.agent.request.AgentRequest`: a question, or a Workflows run of the Research
  Agent) and yields typed events; `agent_choices`, `default_agent`, `agent_label` and
  `agent_name` say which agents are offered and how they are named. Each provider has a module
  in `chats.agent.providers`: an adapter for its stream and a client, over its official SDK
  where one exists; every client takes the same request and settings (`AgentSettings`).
- **Typed events** (`chats.agent.events`): every provider's stream becomes the same events, and
  GROUNDING becomes `citations.references.Citation`s. Nothing outside `chats.agent` reads a
  provider's JSON: `chats.agent.sse` decodes each document and the provider's adapter reads it.
  `chats.agent.logged_events` reads the event log's rows back (rows logged before our schema
  through the Research Agent's adapter), `chats.agent.transcript.Transcript` folds events into
  an answer.
- **Question options** (`chats.agent.options`): what a question may ask for, checked, and the
  request fields they become.
- **Failures**: `AgentError`, with the user's message (never a secret) and a kind (http,
  unreachable, stalled, dropped, agent, cannot_continue); 429, 5xx and connection failures are
  retried before the first event only (`chats.agent.providers.attempts`); `stalled` words an
  agent's silence, whoever notices it, and `subject` starts a sentence with an agent's name.
- **The connections**: `http_transport` is the transport of every streamed call, over this
  event loop's pool (`ssl_context`: one TLS context for all); `close_http_sessions` closes the
  pool (the server's shutdown does); `stream_timeout` is a streamed answer's timeouts.

The wire facts these modules rely on are in docs/PROTOCOL.md. It imports nothing of the rest
of `chats` but `chats.loop` (the event loop's clock and per-loop objects), and never the
database: `make lint` holds that (pyproject.toml, [tool.importlinter]).
"""

from chats.agent._http import (
    AgentError,
    close_http_sessions,
    http_transport,
    ssl_context,
    stalled,
    stream_timeout,
    subject,
)

__all__ = [
    "AgentError",
    "close_http_sessions",
    "http_transport",
    "ssl_context",
    "stalled",
    "stream_timeout",
    "subject",
]
