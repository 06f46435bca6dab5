"""How the site answers a page's form POST (rename, pin, the theme, a version switch...).

Every such form works without script: it posts, and the answer is a redirect back to the page
it was sent from. The page's script posts the same form asking for JSON (`postForm` in
chats/static/chats/site.js), and is answered with JSON instead.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme


def wants_json(request: HttpRequest) -> bool:
    """Whether the page's script sent the form, asking for JSON rather than a page."""
    return request.get_preferred_type(["text/html", "application/json"]) == "application/json"


def redirect_back(request: HttpRequest, *fallback, **fallback_kwargs) -> HttpResponseRedirect:
    """Redirect to the page the form was sent from (its `next` field), if it is on this site;
    else to `fallback` (a URL name and its arguments, as `redirect` takes them)."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect(*fallback, **fallback_kwargs)
