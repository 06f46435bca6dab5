"""A turn's tokens: the one reading of `Turn.consumption`, for the line under an answer, the
usage records, the limits and the metrics.

COMPLETE's `consumption` lists one entry per model (per tier for the Research Agent, whose
`type` is `base` or `pro`): `{"type", "input_tokens", "output_tokens", "cached_tokens"}`
(docs/PROTOCOL.md). Every adapter reports `input_tokens` as every token the model read, cached
ones included, and `cached_tokens` as the part of them read from the provider's cache; Gemini
also lists `reasoning_tokens` (its thoughts) apart from `output_tokens`, and is billed for them
as output, so they count as output here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_MODEL_CHARS = 100


@dataclass(frozen=True)
class ModelTokens:
    """One model's tokens in one turn."""

    model: str
    input: int  # every token the model read, cached ones included
    cached: int  # the part of `input` read from the provider's cache
    output: int  # every token it wrote, reasoning included

    @property
    def total(self) -> int:
        """What the token limit counts."""
        return self.input + self.output


def turn_tokens(consumption: Any) -> list[ModelTokens]:
    """Each model (or tier) of the consumption that used any tokens, in the order reported."""
    found = []
    for entry in consumption if isinstance(consumption, list | tuple) else ():
        if not isinstance(entry, dict):
            continue
        model = str(entry.get("type") or entry.get("model") or "tokens")[:MAX_MODEL_CHARS]
        tokens_in = count(entry.get("input_tokens"))
        tokens_out = count(entry.get("output_tokens")) + count(entry.get("reasoning_tokens"))
        if tokens_in or tokens_out:
            cached = min(count(entry.get("cached_tokens")), tokens_in)
            found.append(ModelTokens(model, tokens_in, cached, tokens_out))
    return found


def count(value: Any) -> int:
    """A token count as reported, or 0 when it is not a positive integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
