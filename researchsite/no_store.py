"""Responses are not kept by browsers or caches on the way unless a view says otherwise.

Every page and download the site serves is someone's own (chats, searches, options, exports,
a share link's copy), and a shared computer's browser cache or a proxy's cache would keep it
past sign-out. Static files are served before the middleware (ASGIStaticFilesHandler) and stay
cacheable; a view that sets Cache-Control itself (the admin's `never_cache`) keeps its own.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

NO_STORE = "no-store"


def no_store_middleware(get_response):
    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> HttpResponse:
            response = await get_response(request)
            response.setdefault("Cache-Control", NO_STORE)
            return response

        markcoroutinefunction(middleware)
    else:

        def middleware(request: HttpRequest) -> HttpResponse:
            response = get_response(request)
            response.setdefault("Cache-Control", NO_STORE)
            return response

    return middleware


no_store_middleware.sync_capable = True
no_store_middleware.async_capable = True
