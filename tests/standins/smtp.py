"""A real SMTP server (aiosmtpd) on a loopback port, and the site's e-mail sent to it."""

from __future__ import annotations

import email
import email.policy
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage

from aiosmtpd.controller import Controller

from tests.servers import free_port

logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every SMTP command


class Inbox:
    """aiosmtpd's handler: every message it accepts, parsed, with the envelope's recipients."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), parsed))
        return "250 Message accepted for delivery"


@contextmanager
def smtp_receiver(settings) -> Iterator[Inbox]:
    """Serve an SMTP receiver and point Django's SMTP backend at it."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    try:
        yield inbox
    finally:
        controller.stop()
