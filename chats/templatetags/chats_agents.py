"""The new-chat form, with the "Agent" select when the site can ask more than one agent."""

from django import template

from chats.agent.providers import agent_choices, default_agent

register = template.Library()


@register.inclusion_tag("chats/_new_chat.html", takes_context=True)
def new_chat_form(context, *, wide: bool = False) -> dict:
    return {
        "csrf_token": context.get("csrf_token"),
        "agents": agent_choices(),
        "default_agent": default_agent(),
        "wide": wide,
    }
