"""The browser tests' fixtures (real Chromium, the whole site on a loopback port)."""

from tests.browser.conftest import analyst, browser, page, site  # noqa: F401
