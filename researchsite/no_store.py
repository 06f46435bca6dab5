"""Responses are not kept by browsers or caches on the way unless a view says otherwise.

Every page and download the site serves is someone's own (chats, searches, options, exports,
a share link's copy), and a shared computer's browser cache or a proxy's cache would keep it
past sign-out. Static files are served before the middleware (ASGIStaticFilesHandler) and stay
cacheable; a view that sets Cache-Control itself (the admin's `never_cache`) keeps its own.
"""

from __future__ import annotations

from django.http import HttpRequest

from researchsite.middleware import request_middleware

NO_STORE = "no-store"


@request_middleware
def no_store_middleware(request: HttpRequest):
    response = yield
    response.setdefault("Cache-Control", NO_STORE)
