"""What the site asks of an agent, and how it reaches one: one type of each for every provider.

`AgentRequest` is one question (or one Workflows run) as the site asks it; each provider's
client (`chats.agent.providers.<name>`) maps onto its own request body the fields its API reads
and leaves the others. `AgentSettings` is one agent's address, key and limits, read from the
site's settings by `chats.agent.providers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from chats.agent.sse import DEFAULT_MAX_LINE_CHARS


class ConversationTurn(NamedTuple):
    """One earlier question and its answer on the branch, for providers without checkpoints."""

    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class Workflow:
    """A Workflows run (docs/PROTOCOL.md, "Workflows"): a template and what fills it in. A turn
    stores it as it was run (`Turn.workflow`)."""

    template: str | dict[str, Any]  # a template id, or an inline template object
    input: dict[str, str] | None = None  # the values of its {{name}} placeholders
    model_name: str | None = None
    time_range: str | None = None


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One question to any agent, or one Workflows run of the Research Agent."""

    message: str  # the question; a workflow's is its title (the run sends `workflow`)
    research_effort: str = "standard"
    # Agents without server-side conversations are sent the branch: its earlier questions and
    # answers, oldest first; empty for a first question.
    history: tuple[ConversationTurn, ...] = ()
    previous_response_id: str | None = None  # OpenAI/xAI may continue server-side with it
    # The Research Agent continues its own conversation from a checkpoint (docs/PROTOCOL.md,
    # "Request").
    chat_id: str | None = None
    from_checkpoint_id: str | None = None
    persistence_mode: str = "enabled"
    # Question options (chats/agent/options.py, `request_fields`), each sent only when set.
    model_name: str | None = None
    expected_output: str | None = None
    structured_output_schema: dict[str, Any] | None = None
    tools_configs: dict[str, Any] | None = None
    # Set: a Workflows run instead of a question (chats/agent/providers/workflows.py).
    workflow: Workflow | None = None


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How to reach one agent: its address, its key and the limits of a call."""

    url: str = ""  # the endpoint, or an SDK's base URL ("": the SDK's own)
    api_key: str = field(default="", repr=False)
    model: str = ""  # "": the provider's default model
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0  # between two chunks: an agent's heartbeats keep a run alive
    max_retries: int = 3
    backoff_base: float = 0.5  # the first retry's delay in seconds, doubled for each next one
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS  # AGENT_MAX_LINE_BYTES: a longer line is skipped
