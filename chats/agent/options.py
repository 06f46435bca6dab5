"""Question options: what the composer's "Options" panel sets, checked, stored per chat, and
turned into the Research Agent's request fields (docs/PROTOCOL.md, "Request", `tools_configs`).

The page sends options in our own flat shape (`QuestionOptions.to_json`); `request_fields`
is the one place that spells them the way the API documents them, sending only what is set.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import jsonschema

MODELS = ("base", "pro")
LIST_OPTIONS = ("entities_all_of", "entities_any_of", "entities_none_of", "sources", "tags")
MAX_LIST_ITEMS = 20
MAX_ITEM_CHARS = 100
MAX_EXPECTED_OUTPUT_CHARS = 2000
FRESHNESS_RANGE = (1, 10)
FIELDS = (
    "model",
    "period_start",
    "period_end",
    *LIST_OPTIONS,
    "freshness_boost",
    "expected_output",
    "charts",
    "schema_id",
)


class OptionsError(ValueError):
    """Options we refuse; the message names the option and is shown to the user."""


@dataclass(frozen=True)
class QuestionOptions:
    model: str = ""  # "" leaves the API's default (base)
    period_start: str = ""  # ISO dates, "" for open
    period_end: str = ""
    entities_all_of: tuple[str, ...] = ()
    entities_any_of: tuple[str, ...] = ()
    entities_none_of: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    freshness_boost: int | None = None
    expected_output: str = ""
    charts: bool = False
    schema_id: int | None = None  # one of the owner's saved OutputSchemas

    def to_json(self) -> dict[str, Any]:
        """Return the set options only, as stored on the chat and sent by the page."""
        data: dict[str, Any] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if value in ("", (), None, False):
                continue
            data[name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_stored(cls, data: Any) -> QuestionOptions:
        """Return stored options, or none at all if they no longer pass today's checks."""
        try:
            return parse_options(data or {})
        except OptionsError:
            return cls()


def parse_options(data: Any) -> QuestionOptions:
    """Return the checked options of an `ask` frame, or raise OptionsError saying what is wrong."""
    if not isinstance(data, dict):
        raise OptionsError("options must be an object.")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise OptionsError(f"Unknown option: {unknown[0][:40]}.")
    values: dict[str, Any] = {}
    model = data.get("model", "")
    if model not in ("", *MODELS):
        raise OptionsError("Model must be 'base' or 'pro'.")
    values["model"] = model
    start = _date(data.get("period_start", ""), "From")
    end = _date(data.get("period_end", ""), "To")
    if start and end and start > end:
        raise OptionsError("The From date must not be after the To date.")
    values["period_start"], values["period_end"] = start, end
    for name in LIST_OPTIONS:
        values[name] = _names(data.get(name, []), name.replace("_", " "))
    boost = data.get("freshness_boost")
    if boost is not None:
        low, high = FRESHNESS_RANGE
        if not (isinstance(boost, int) and not isinstance(boost, bool) and low <= boost <= high):
            raise OptionsError(f"Freshness boost must be a whole number from {low} to {high}.")
    values["freshness_boost"] = boost
    expected = data.get("expected_output", "")
    if not isinstance(expected, str) or len(expected) > MAX_EXPECTED_OUTPUT_CHARS:
        raise OptionsError(
            f"Expected output must be text of at most {MAX_EXPECTED_OUTPUT_CHARS} characters."
        )
    if "\x00" in expected or not _encodable(expected):
        raise OptionsError("Expected output contains characters that cannot be sent.")
    values["expected_output"] = expected.strip()
    charts = data.get("charts", False)
    if not isinstance(charts, bool):
        raise OptionsError("Charts must be true or false.")
    values["charts"] = charts
    schema_id = data.get("schema_id")
    if schema_id is not None and not (
        isinstance(schema_id, int) and not isinstance(schema_id, bool) and 0 < schema_id < 2**63
    ):
        raise OptionsError("schema_id must be the id of a saved schema, or null.")
    values["schema_id"] = schema_id
    return QuestionOptions(**values)


def _date(value: Any, label: str) -> str:
    if value in ("", None):
        return ""
    if not isinstance(value, str) or len(value) != 10:
        raise OptionsError(f"{label} must be a date written YYYY-MM-DD.")
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise OptionsError(f"{label} must be a date written YYYY-MM-DD.") from None


def _names(value: Any, label: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LIST_ITEMS:
        raise OptionsError(f"{label.capitalize()} must be a list of at most {MAX_LIST_ITEMS}.")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_ITEM_CHARS:
            raise OptionsError(
                f"Each of {label} must be a name or id of 1 to {MAX_ITEM_CHARS} characters."
            )
        if "\x00" in item or not _encodable(item):
            raise OptionsError(f"{label.capitalize()} contain characters that cannot be sent.")
        if item.strip() not in names:
            names.append(item.strip())
    return tuple(names)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def request_fields(options: QuestionOptions, schema: dict[str, Any] | None) -> dict[str, Any]:
    """Return the AgentRequest fields these options set, spelled as the API documents them."""
    fields: dict[str, Any] = {}
    if options.model:
        fields["model_name"] = options.model
    if options.expected_output:
        fields["expected_output"] = options.expected_output
    if schema is not None:
        fields["structured_output_schema"] = schema
    filters: dict[str, Any] = {}
    period = {
        key: value
        for key, value in (("start", options.period_start), ("end", options.period_end))
        if value
    }
    if period:
        filters["period"] = period
    entities = {
        key: list(value)
        for key, value in (
            ("all_of", options.entities_all_of),
            ("any_of", options.entities_any_of),
            ("none_of", options.entities_none_of),
        )
        if value
    }
    if entities:
        filters["entities"] = entities
    # UNCERTAIN: the API reference names the filters `entities`, `period`, `content` and `tags` but
    # not their inner shapes beyond entities and period. We send sources under `content` and both in
    # the entities' `any_of` form; change it here (one place) when the API reference says more.
    if options.sources:
        filters["content"] = {"sources": {"any_of": list(options.sources)}}
    if options.tags:
        filters["tags"] = {"any_of": list(options.tags)}
    search: dict[str, Any] = {}
    if filters:
        search["query_filters"] = filters
    if options.freshness_boost is not None:
        search["ranking_parameters"] = {"freshness_boost": options.freshness_boost}
    tools: dict[str, Any] = {}
    if search:
        tools["search"] = search
    if options.charts:
        # From the cookbook client, not the API reference (docs/PROTOCOL.md): off unless asked.
        tools["python_code_execution"] = {"enabled": True, "chart_generation_enabled": True}
    if tools:
        fields["tools_configs"] = tools
    return fields


# --- Structured output schemas ------------------------------------------------------------------


# Levels of objects and lists a schema may nest: ample for a table's rows (a real one uses 4-8),
# and far from where the meta-schema validator's recursion would fail.
MAX_SCHEMA_DEPTH = 32


def check_output_schema(schema: Any) -> None:
    """Raise OptionsError unless `schema` is a JSON Schema whose top level is an object or a list
    of objects (docs/PROTOCOL.md, `structured_output_schema`)."""
    if not isinstance(schema, dict):
        raise OptionsError("A schema must be a JSON object.")
    if nested_deeper_than(schema, MAX_SCHEMA_DEPTH):  # before the validator recurses through it
        raise OptionsError(f"A schema may nest at most {MAX_SCHEMA_DEPTH} levels of {{}} and [].")
    try:
        # jsonschema: the reference validator; checks the schema against the 2020-12 meta-schema.
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise OptionsError(f"This is not a valid JSON Schema: {error.message}") from None
    top = schema.get("type")
    items = schema.get("items")
    if top == "object":
        return
    if top == "array" and isinstance(items, dict) and items.get("type") == "object":
        return
    raise OptionsError(
        'The top level must be an object ("type": "object") or a list of objects'
        ' ("type": "array" with "items" of "type": "object").'
    )


def nested_deeper_than(value: Any, levels: int) -> bool:
    """Return True when `value` nests lists and objects more than `levels` deep.

    Iterative, so it answers for any depth json.loads can return (recursive code, jsonschema's
    validator among it, exhausts Python's recursion limit a few hundred levels down).
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > levels:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
