"""A real SMTP server (aiosmtpd) and a real HTTP receiver for webhooks, each on a free local port, started
by the test; and the receiver-side verification recipe read out of docs/notifications.md."""

from __future__ import annotations

import email
import email.policy
import json
import queue
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from backend.settings import get_settings
from tests.support.servers import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"


@dataclass
class Mail:
    to: list[str]
    subject: str
    text: str
    arrived: float


class Inbox:
    def __init__(self) -> None:
        self.mails: queue.Queue[Mail] = queue.Queue()

    def take(self, count: int, timeout: float = 10.0) -> list[Mail]:
        """`count` mails, waiting at most `timeout` seconds for each (a missing one fails the test)."""
        return [self.mails.get(timeout=timeout) for _ in range(count)]


@pytest.fixture
def inbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    import time

    box = Inbox()

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            box.mails.put(
                Mail(
                    list(envelope.rcpt_tos),
                    str(message["Subject"]),
                    message.get_body().get_content(),
                    time.monotonic(),
                )
            )
            return "250 OK"

    port = free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("CLEANROOM_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("CLEANROOM_SMTP_PORT", str(port))
    monkeypatch.setenv("CLEANROOM_SMTP_STARTTLS", "false")
    monkeypatch.setenv("CLEANROOM_SMTP_TIMEOUT_SECONDS", "2")
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "true")  # the receiver is on this host
    get_settings.cache_clear()
    try:
        yield box
    finally:
        controller.stop()
        get_settings.cache_clear()


@dataclass
class Request:
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    requests: queue.Queue[Request] = field(default_factory=queue.Queue)
    answers: list[int] = field(default_factory=list)  # statuses to answer, in order; then 200

    def take(self, count: int, timeout: float = 10.0) -> list[Request]:
        return [self.requests.get(timeout=timeout) for _ in range(count)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    port = free_port()
    got = Receiver(url=f"http://127.0.0.1:{port}/hook")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = got.answers.pop(0) if got.answers else 200
            got.requests.put(Request(dict(self.headers.items()), body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def verify() -> Any:
    """The receiver's `verify` exactly as docs/notifications.md gives it (the python block after the marker)."""
    text = DOC.read_text()
    block = re.search(r"<!-- verify-recipe -->\s*```python\n(.*?)```", text, re.S)
    assert block, "docs/notifications.md lost its verify recipe"
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - our own document's code
    return namespace["verify"]
