"""One body, written once, serves a sync middleware chain and an async one alike."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from asgiref.sync import iscoroutinefunction
from django.http import HttpResponse, HttpResponseForbidden
from django.test import RequestFactory

from researchsite.middleware import request_middleware

steps: list[str] = []


@contextmanager
def noted(name: str):
    steps.append(f"enter {name}")
    try:
        yield
    finally:
        steps.append(f"exit {name}")


@request_middleware
def tagging(request):
    if request.GET.get("refuse"):
        return HttpResponseForbidden("no")
    with noted("request"):
        response = yield
    response["X-Tag"] = "tagged"


def view(request):
    if request.GET.get("fail"):
        raise RuntimeError("the view failed")
    return HttpResponse("ok")


async def async_view(request):
    return view(request)


@pytest.fixture(autouse=True)
def _fresh_steps():
    steps.clear()


def test_a_sync_chain_gets_a_sync_middleware_that_adjusts_the_response():
    middleware = tagging(view)
    assert not iscoroutinefunction(middleware)
    response = middleware(RequestFactory().get("/"))
    assert (response.content, response["X-Tag"]) == (b"ok", "tagged")
    assert steps == ["enter request", "exit request"]


async def test_an_async_chain_gets_an_async_middleware_that_adjusts_the_response():
    middleware = tagging(async_view)
    assert iscoroutinefunction(middleware)
    response = await middleware(RequestFactory().get("/"))
    assert (response.content, response["X-Tag"]) == (b"ok", "tagged")
    assert steps == ["enter request", "exit request"]


async def test_a_body_that_answers_before_its_yield_answers_in_the_views_place():
    request = RequestFactory().get("/", {"refuse": "1"})
    assert tagging(view)(request).status_code == 403
    assert (await tagging(async_view)(request)).status_code == 403
    assert steps == []


def test_the_bodys_with_block_is_exited_when_the_view_raises():
    with pytest.raises(RuntimeError, match="the view failed"):
        tagging(view)(RequestFactory().get("/", {"fail": "1"}))
    assert steps == ["enter request", "exit request"]


def test_a_body_that_yields_twice_is_refused():
    @request_middleware
    def twice(request):
        yield
        yield

    with pytest.raises(RuntimeError, match="yields once"):
        twice(view)(RequestFactory().get("/"))


def test_django_is_told_it_takes_both_chains():
    assert tagging.sync_capable and tagging.async_capable
