"""The site's own middleware is written once and runs in a sync chain and an async one alike.

Django builds its middleware chain sync (the test client, a sync view) or async (the server,
whose async views must stay async: a run started by one outlives the request), and a
middleware that takes both must be written twice, `def` and `async def`, with the same body
(Django's `sync_and_async_middleware` idiom). `request_middleware` writes that pair once, around
a generator function that holds the body:

    @request_middleware
    def tagged(request):
        response = yield  # the view (and the middleware below) answers here
        response["X-Tag"] = "1"

Code before the `yield` runs before the view; returning a response there answers in the view's
place. What follows the `yield` adjusts the response; a `with` block around the `yield` is
exited whatever happens to the request.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from functools import wraps

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware

Body = Callable[[HttpRequest], Generator[None, HttpResponse, HttpResponse | None]]


def request_middleware(body: Body):
    """A middleware factory, sync or async as the chain below it, running `body` around it."""

    @sync_and_async_middleware
    @wraps(body)
    def factory(get_response):
        if iscoroutinefunction(get_response):

            async def middleware(request: HttpRequest) -> HttpResponse:
                steps = body(request)
                answer = _before(steps)
                if answer is not None:
                    return answer
                try:
                    response = await get_response(request)
                except BaseException:
                    steps.close()
                    raise
                return _after(steps, response)

        else:

            def middleware(request: HttpRequest) -> HttpResponse:
                steps = body(request)
                answer = _before(steps)
                if answer is not None:
                    return answer
                try:
                    response = get_response(request)
                except BaseException:
                    steps.close()
                    raise
                return _after(steps, response)

        return middleware

    return factory


def _before(steps: Generator) -> HttpResponse | None:
    """Run the body up to its `yield`; the response it returned instead, if it did."""
    try:
        next(steps)
    except StopIteration as answered:
        return answered.value
    return None


def _after(steps: Generator, response: HttpResponse) -> HttpResponse:
    """Hand the view's response to the body, and run it to its end."""
    try:
        steps.send(response)
    except StopIteration:
        return response
    steps.close()
    raise RuntimeError(f"{steps.__qualname__} yielded twice; a middleware body yields once")
