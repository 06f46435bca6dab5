"""The endpoints a load balancer and a monitoring system call: /healthz, /readyz, /metrics.

They are answered here, in front of Django (no middleware, no session, no host check): a
balancer probes each worker by its own address, and /healthz must answer even when the
database is down.

- `GET /healthz`: 200 while the process can serve requests. Touches nothing else.
- `GET /readyz`: 200 when the database answers and its migrations are applied and, with
  REDIS_URL, Redis answers; else 503. The JSON body names each check and its state, e.g.
  `{"database": "unreachable", "redis": "ok", "process": "serving"}`. A process shutting down
  reports `"process": "draining"` (503) while its running turns finish.
- `GET /metrics`: Prometheus' text format (prometheus_client), for the addresses in
  METRICS_ALLOWED_IPS or a request with `Authorization: Bearer <METRICS_TOKEN>`. With
  PROMETHEUS_MULTIPROC_DIR set (workers sharing a port), the workers' metrics are summed.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import json
import logging
import os
from ipaddress import IPv4Network, IPv6Network

from django.conf import settings

logger = logging.getLogger(__name__)

IPNetwork = IPv4Network | IPv6Network

OK = "ok"
UNREACHABLE = "unreachable"
MIGRATIONS_PENDING = "migrations_pending"

# Migrations are read from disk and the database once they are found applied, then not again:
# a process's code cannot change while it runs, and a database rolled back under it shows up
# as errors anyway. Until then every probe looks again.
_migrations_applied = False


def _database_state_now() -> str:
    """Connect on a fresh connection of this thread, check the migrations, close (worker thread)."""
    global _migrations_applied
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    connection = connections.create_connection("default")
    try:
        try:
            connection.ensure_connection()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as error:
            logger.warning("Readiness: the database does not answer (%s)", type(error).__name__)
            return UNREACHABLE
        if not _migrations_applied:
            executor = MigrationExecutor(connection)
            if executor.migration_plan(executor.loader.graph.leaf_nodes()):
                return MIGRATIONS_PENDING
            _migrations_applied = True
        return OK
    finally:
        connection.close()


async def _database_state() -> str:
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(_database_state_now), settings.READINESS_TIMEOUT_SECONDS
        )
    except TimeoutError:
        return UNREACHABLE
    except Exception:
        logger.exception("Readiness: checking the database failed")
        return UNREACHABLE


async def _redis_state() -> str:
    import redis.asyncio as redis

    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=settings.READINESS_TIMEOUT_SECONDS,
        socket_connect_timeout=settings.READINESS_TIMEOUT_SECONDS,
    )
    try:
        async with asyncio.timeout(settings.READINESS_TIMEOUT_SECONDS):
            await client.ping()
        return OK
    except Exception as error:
        logger.warning("Readiness: Redis does not answer (%s)", type(error).__name__)
        return UNREACHABLE
    finally:
        await client.aclose()


async def readiness() -> dict[str, str]:
    """Each check's state; the process is ready when all are "ok" or "serving"."""
    from chats.run.draining import is_draining

    checks = {}
    if settings.REDIS_URL:
        checks["database"], checks["redis"] = await asyncio.gather(
            _database_state(), _redis_state()
        )
    else:
        checks["database"] = await _database_state()
    checks["process"] = "draining" if is_draining() else "serving"
    return checks


def _metrics_allowed(scope) -> bool:
    token = settings.METRICS_TOKEN
    if token:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value.decode("latin-1")
                if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return True
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    return any(address in network for network in _networks(tuple(settings.METRICS_ALLOWED_IPS)))


@functools.cache
def _networks(allowed: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """METRICS_ALLOWED_IPS read once (per value: a test may change it), a bad entry said once."""
    networks = []
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            logger.error("METRICS_ALLOWED_IPS: %r is not an address or a network", entry)
    return tuple(networks)


def metrics_text() -> tuple[bytes, str]:
    """The metrics of this process, or of every worker in multiprocess mode, and their type."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


async def _respond(send, status: int, body: bytes, content_type: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _json(document: dict) -> bytes:
    return json.dumps(document).encode()


def with_operations_endpoints(app):
    """Answer /healthz, /readyz and /metrics; hand every other request to `app`."""

    async def operations_app(scope, receive, send):
        path = scope["path"]
        if path not in ("/healthz", "/readyz", "/metrics"):
            return await app(scope, receive, send)
        if scope["method"] not in ("GET", "HEAD"):
            return await _respond(send, 405, b"GET only\n", "text/plain")
        if path == "/healthz":
            return await _respond(send, 200, _json({"status": "ok"}), "application/json")
        if path == "/readyz":
            checks = await readiness()
            ready = all(state in (OK, "serving") for state in checks.values())
            return await _respond(send, 200 if ready else 503, _json(checks), "application/json")
        if not settings.METRICS_ENABLED:
            return await _respond(send, 404, b"Metrics are off (METRICS_ENABLED).\n", "text/plain")
        if not _metrics_allowed(scope):
            return await _respond(send, 403, b"Not allowed.\n", "text/plain")
        body, content_type = await asyncio.to_thread(metrics_text)
        return await _respond(send, 200, body, content_type)

    return operations_app
