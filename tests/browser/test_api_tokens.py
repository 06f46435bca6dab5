"""The API tokens page in real Chromium: a token created in the browser works against the API
once, shown once, and stops working when revoked there; a webhook on a private address is
refused with a clear message."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from chats.models import ApiToken
from tests.browser.conftest import log_in


def test_a_token_made_on_the_page_calls_the_api_until_revoked(browser, site, analyst, page):
    log_in(page, site)
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    page.get_by_label("Name").fill("notebook")
    page.get_by_label("Expires").select_option(label="In 30 days")
    page.get_by_role("button", name="Create token").click()

    token = page.get_by_label("New API token").input_value()
    assert token.startswith("rsk_") and len(token) == 47
    row = page.locator("tr", has_text="notebook")
    expect(row).to_contain_text("read, ask")
    expect(row).to_contain_text(token[:8] + "…")
    expect(row).to_contain_text("never")  # not used yet
    stored = ApiToken.objects.get()
    assert stored.owner == analyst and token not in (stored.digest, stored.hint)

    api = httpx.Client(
        base_url=f"{site}/api/v1", headers={"Authorization": f"Bearer {token}"}, trust_env=False
    )
    chat = api.post("/chats", json={"title": "From a notebook"})
    assert chat.status_code == 201
    page.reload()
    expect(page.get_by_label("New API token")).to_have_count(0)  # shown once
    expect(page.locator("tr", has_text="notebook")).not_to_contain_text("never")  # last used
    page.goto(f"{site}/")
    expect(page.get_by_role("link", name="From a notebook")).to_be_visible()  # in the library
    page.goto(f"{site}/api-tokens/")

    page.get_by_role("button", name="Revoke notebook").click()
    expect(page.locator("tr", has_text="notebook")).to_contain_text("Revoked")
    assert api.get("/agents").status_code == 401
    assert page.js_errors == []


def test_a_webhook_on_a_private_address_is_refused_on_the_page(browser, site, analyst, page):
    log_in(page, site)
    page.goto(f"{site}/api-tokens/")
    page.get_by_label("URL").fill("http://192.168.1.10/hooks")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_role("alert")).to_contain_text("a private address")
    expect(page.get_by_text("No webhook endpoints yet.")).to_be_visible()
