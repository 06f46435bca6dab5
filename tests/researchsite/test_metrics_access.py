"""Who may read /metrics: METRICS_ALLOWED_IPS, read once rather than on every scrape; nobody
when metrics are off. (tests/researchsite/test_operations.py scrapes a real server process.)"""

from __future__ import annotations

import logging

from researchsite.operations import with_operations_endpoints


async def scrape(client: str, path: str = "/metrics") -> int:
    """The status `path` answers a request from `client` (an ASGI call, as uvicorn makes)."""
    sent = []

    async def send(message):
        sent.append(message)

    async def not_the_site(scope, receive, send):
        raise AssertionError("/metrics is answered before the site")

    scope = {"type": "http", "method": "GET", "path": path, "headers": []}
    await with_operations_endpoints(not_the_site)({**scope, "client": (client, 40000)}, None, send)
    return sent[0]["status"]


async def test_the_allow_list_is_read_once_and_a_bad_entry_said_once(settings, caplog):
    settings.METRICS_ALLOWED_IPS = ["not-a-network", "10.0.0.0/8", "192.0.2.7"]
    with caplog.at_level(logging.ERROR, logger="researchsite.operations"):
        statuses = [await scrape(client) for client in ("10.1.2.3", "192.0.2.7", "192.0.2.8")]
        statuses.append(await scrape("10.9.9.9"))
    assert statuses == [200, 200, 403, 200]
    assert [record.getMessage() for record in caplog.records] == [
        "METRICS_ALLOWED_IPS: 'not-a-network' is not an address or a network"
    ]


async def test_a_changed_allow_list_is_read_again(settings):
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert await scrape("10.1.2.3") == 200
    settings.METRICS_ALLOWED_IPS = ["192.0.2.0/24"]
    assert await scrape("10.1.2.3") == 403


async def test_metrics_off_answers_404_and_the_probes_still_answer(settings):
    settings.METRICS_ENABLED = False
    assert await scrape("127.0.0.1") == 404
    assert await scrape("127.0.0.1", "/healthz") == 200
