"""Webhooks against the real served site and a real receiver that verifies each delivery with
the `standardwebhooks` library: a changed watch, a turn that asks for its end, retries, and
the address rules at creation and at delivery."""

from __future__ import annotations

import json
from datetime import time, timedelta
from urllib.parse import urlsplit

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from chats.models import Chat, Watch, WebhookDelivery, WebhookEndpoint
from chats.watch.tasks import watch_create
from chats.webhooks.tasks import webhook_deliver
from demo_agent.scripted import Reply, cited_answer_stream
from demo_agent.wire import read_body
from tests.chats.api.conftest import api_client, cited_reply, token_for
from tests.chats.watch.answers import SECOND, answered_turn
from tests.servers import serve_asgi
from tests.waiting import wait_until_sync

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A webhook endpoint: verifies every delivery with `standardwebhooks`, answers 500 to the
    first `failures` attempts and 204 after."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.secret = ""
        self.attempts: list[dict[str, str]] = []  # each attempt's headers
        self.received: list[dict] = []  # the verified payloads it took

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive, limit=1 << 20)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.attempts.append(headers)
        try:
            payload = Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            status = 401
        else:
            status = 500 if len(self.attempts) <= self.failures else 204
            if status == 204:
                self.received.append(payload)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def receiver(settings):
    app = Receiver()
    with serve_asgi(app) as url:
        app.url = f"{url}/hooks"
        settings.WEBHOOK_ALLOWED_HOSTS = [urlsplit(url).netloc]  # a test server on 127.0.0.1
        settings.WEBHOOK_RETRY_SECONDS = [0, 0, 0]
        yield app


def add_endpoint(client, receiver: Receiver, events: list[str]) -> dict:
    created = client.post("/webhooks", json={"url": receiver.url, "events": events})
    assert created.status_code == 201, created.text
    receiver.secret = created.json()["secret"]
    assert receiver.secret.startswith("whsec_")
    return created.json()


def test_a_changed_watch_is_delivered_signed_on_the_third_try(site, upstream, receiver, user):
    receiver.failures = 2
    with api_client(site, token_for(user)) as client:
        endpoint = add_endpoint(client, receiver, ["watch.changed"])
        chat = Chat.objects.create(owner=user)
        watch = watch_create(
            owner=user, turn=answered_turn(chat), every="day", time_of_day=time(9, 0)
        )
        due = timezone.now() - timedelta(minutes=1)
        Watch.objects.filter(pk=watch.pk).update(next_run_at=due)
        DBTaskResult.objects.update(run_after=due)  # the site's own task worker runs it now
        upstream.queue(Reply.events(*cited_answer_stream(SECOND)))

        wait_until_sync(
            lambda: WebhookDelivery.objects.filter(status="delivered").exists(),
            timeout=60,
            what="the delivery to be taken",
        )
        (delivery,) = client.get(f"/webhooks/{endpoint['id']}/deliveries").json()

    assert delivery["status"] == "delivered" and delivery["attempts"] == 3
    assert delivery["last_status_code"] == 204 and delivery["event"] == "watch.changed"
    assert len(receiver.attempts) == 3
    assert {a["webhook-id"] for a in receiver.attempts} == {delivery["message_id"]}
    (payload,) = receiver.received
    assert payload["type"] == "watch.changed"
    data = payload["data"]
    assert data["watch_id"] == watch.pk and data["question"] == "How did revenue do?"
    assert data["summary"] == "2 figures changed, 1 source added, 1 dropped"
    assert {(f["before"], f["after"]) for f in data["figures_changed"]} == {
        ("12%", "14%"),
        ("$4.1 billion", "$4.2 billion"),
    }
    assert f"/compare/?a={data['previous_turn_id']}&b={data['turn_id']}" in data["links"]["compare"]
    assert data["links"]["turn"].endswith(f"/api/v1/turns/{data['turn_id']}")


def test_a_turn_that_asks_sends_turn_finished_and_others_do_not(site, upstream, receiver, user):
    upstream.queue(cited_reply(), cited_reply())
    with api_client(site, token_for(user)) as client:
        add_endpoint(client, receiver, ["turn.finished"])
        chat = client.post("/chats", json={}).json()["id"]
        quiet = client.post(f"/chats/{chat}/turns?wait=true", json={"question": "a"}).json()
        asked = client.post(f"/chats/{chat}/turns", json={"question": "b", "webhook": True}).json()
        wait_until_sync(lambda: receiver.received, timeout=60, what="turn.finished")

    (payload,) = receiver.received
    assert payload["type"] == "turn.finished"
    assert payload["data"]["turn_id"] == asked["id"] != quiet["id"]
    assert payload["data"]["status"] == "complete"
    assert payload["data"]["links"]["turn"].endswith(f"/api/v1/turns/{asked['id']}")
    assert WebhookDelivery.objects.count() == 1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://10.1.2.3/hooks", "private address"),
        ("http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("http://127.0.0.1:9/hooks", "loopback address"),  # not in WEBHOOK_ALLOWED_HOSTS
        ("file:///etc/passwd", "not an http(s) link"),
    ],
)
def test_an_endpoint_on_a_private_address_is_refused(site, user, url, why):
    with api_client(site, token_for(user)) as client:
        refused = client.post("/webhooks", json={"url": url, "events": ["turn.finished"]})
    assert refused.status_code == 400 and why in refused.json()["detail"]
    assert not WebhookEndpoint.objects.exists()


def test_a_delivery_is_refused_when_its_address_is_no_longer_allowed(receiver, user, settings):
    from chats.webhooks.services import webhook_endpoint_create

    endpoint, receiver.secret = webhook_endpoint_create(
        owner=user, url=receiver.url, events=["turn.finished"]
    )
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event="turn.finished", message_id="msg_1", body=json.dumps({})
    )
    settings.WEBHOOK_ALLOWED_HOSTS = []  # the allow-list changed after the endpoint was added
    outcome = webhook_deliver.call(delivery.pk)
    delivery.refresh_from_db()
    assert "refused: 127.0.0.1 is a loopback address" in delivery.last_error
    assert delivery.attempts == 1 and delivery.status == "pending" and "failed" in outcome
    assert receiver.attempts == []
