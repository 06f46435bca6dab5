"""Read and validate the JSON body of a research request (docs/PROTOCOL.md, "Request")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from demo_agent.charts import wants_charts
from demo_agent.errors import HttpError
from demo_agent.options import RequestOptions, parse_options

EFFORTS = ("lite", "standard")
PERSISTENCE_MODES = ("enabled", "disabled")
INITIAL_CHECKPOINT = "INITIAL"  # documented sentinel: branch from the start of the chat


@dataclass(frozen=True)
class ResearchRequest:
    message: str
    research_effort: str
    chat_id: str | None
    from_checkpoint_id: str | None
    persistence_mode: str
    charts: bool = False  # tools_configs.python_code_execution.chart_generation_enabled
    options: RequestOptions = field(default_factory=RequestOptions)


def parse_request(body: bytes) -> ResearchRequest:
    """Return the request, or raise HttpError 400 (not JSON) or 422 (wrong shape)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise HttpError(400, f"Invalid JSON body: {error}") from None
    if not isinstance(data, dict):
        raise HttpError(422, [_error(["body"], "Input should be a valid dictionary", "dict_type")])

    errors: list[dict[str, Any]] = []
    message = data.get("message")
    if "message" not in data:
        errors.append(_error(["body", "message"], "Field required", "missing"))
    elif not isinstance(message, str):
        errors.append(_error(["body", "message"], "Input should be a valid string", "string_type"))
    elif not message:
        errors.append(
            _error(
                ["body", "message"], "String should have at least 1 character", "string_too_short"
            )
        )
    effort = data.get("research_effort")
    if "research_effort" not in data:
        errors.append(_error(["body", "research_effort"], "Field required", "missing"))
    elif effort not in EFFORTS:
        errors.append(
            _error(["body", "research_effort"], "Input should be 'lite' or 'standard'", "enum")
        )
    persistence = data.get("persistence_mode", "disabled")
    if persistence not in PERSISTENCE_MODES:
        errors.append(
            _error(["body", "persistence_mode"], "Input should be 'enabled' or 'disabled'", "enum")
        )
    for name in ("chat_id", "from_checkpoint_id"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            errors.append(_error(["body", name], "Input should be a valid string", "string_type"))
    if errors:
        raise HttpError(422, errors)
    options = parse_options(data)

    return ResearchRequest(
        message=message,
        research_effort=effort,
        # An empty id is read as no id, like an omitted one.
        chat_id=data.get("chat_id") or None,
        from_checkpoint_id=data.get("from_checkpoint_id") or None,
        persistence_mode=persistence,
        charts=wants_charts(data),
        options=options,
    )


def _error(loc: list[str], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}
