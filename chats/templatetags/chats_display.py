"""Template filters over `chats.answer.display`: the templates and live frames share its rules."""

from __future__ import annotations

from typing import Any

from django import template

from chats.answer import display

register = template.Library()

register.filter("chat_heading", display.chat_heading)
register.filter("page_title", display.page_title)
register.filter("plan_title", display.plan_title)
register.filter("step_status_label", display.step_status_label)
register.filter("step_status_class", display.step_status_class)
register.filter("degraded_notice", display.degraded_notice)


@register.filter
def trace_label(trace: Any) -> str:
    """Return the "How this answer was researched" line of an audit trace."""
    return display.trace_label(trace.audit_type, trace.title)
