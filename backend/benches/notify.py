"""`cleanroom bench notify`: how long after a proposal its approval request is in the approvers' inboxes and
at the company's webhook receiver (issue 56's goal: within 5 s). The demo companies in a fresh SQLite database
in a temporary folder, the API in-process, a minimal SMTP server and an HTTP receiver on loopback (both
record when a message arrived); `PROPOSALS` proposals by alice's assistant token, one after the other, each
timed from the moment its POST is sent to the moment the last of its two mails (alice's, the admin's) and its
webhook have arrived."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROPOSALS = 10
APPROVERS = ("alice@acme.example", "admin@acme.example")
WAIT_SECONDS = 30.0


class _Sink:
    """A minimal SMTP server (enough for smtplib: EHLO/HELO, MAIL, RCPT, DATA, QUIT) noting each arrival."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, list[str]]] = []
        self.changed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rcpt: list[str] = []
        writer.write(b"220 bench ESMTP\r\n")
        while line := await reader.readline():
            verb = line[:4].upper()
            if verb == b"DATA":
                writer.write(b"354 go on\r\n")
                while (await reader.readline()) not in (b".\r\n", b""):
                    pass
                self.arrivals.append((time.monotonic(), rcpt))
                self.changed.set()
                rcpt = []
                writer.write(b"250 taken\r\n")
            elif verb == b"RCPT":
                rcpt.append(line.decode().split(":", 1)[1].strip().strip("<>").split(">")[0])
                writer.write(b"250 ok\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                await writer.drain()
                break
            else:  # EHLO, HELO, MAIL, RSET, NOOP
                writer.write(b"250 ok\r\n")
            await writer.drain()
        writer.close()


def _receiver() -> tuple[ThreadingHTTPServer, list[float]]:
    arrivals: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            arrivals.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, arrivals


async def _bench(url: str, proposals: int) -> dict[str, Any]:
    from litestar.testing import AsyncTestClient

    from backend.app import create_app
    from backend.demo.seed import seed
    from backend.settings import get_settings
    from backend.tenancy.origin import origin_of
    from backend.tenancy.tables import Company

    sink = _Sink()
    smtp = await asyncio.start_server(sink.handle, "127.0.0.1", 0)
    receiver, hooks = _receiver()
    os.environ.update(
        CLEANROOM_WEBHOOK_ALLOW_PRIVATE="true",  # the receiver is on loopback
        CLEANROOM_ALLOWED_HOSTS='["testserver.local"]',
    )
    get_settings.cache_clear()
    app = create_app(database_url=url, run_hooks=False)
    origin = {"origin": origin_of(get_settings().effective_console_url) or ""}
    latencies: list[float] = []
    hook_latencies: list[float] = []
    try:
        async with AsyncTestClient(app=app) as client:
            await seed()  # its own proposals tell nobody: mail is set only after it
            await Company.update({Company.code_execution_enabled: True}).where(
                Company.name == "Acme Analytics"
            )
            os.environ.update(
                CLEANROOM_SMTP_HOST="127.0.0.1",
                CLEANROOM_SMTP_PORT=str(smtp.sockets[0].getsockname()[1]),
                CLEANROOM_SMTP_STARTTLS="false",
            )
            get_settings.cache_clear()
            login = {"email": "admin@acme.example", "password": "demo"}
            assert (await client.post("/api/auth/login", json=login, headers=origin)).status_code == 200
            hook = {"url": f"http://127.0.0.1:{receiver.server_port}/hook"}
            assert (await client.post("/api/company/webhooks", json=hook, headers=origin)).status_code == 201
            client.cookies.clear()
            login = {"email": "alice@acme.example", "password": "demo"}
            assert (await client.post("/api/auth/login", json=login, headers=origin)).status_code == 200
            made = await client.post("/api/me/tokens", json={"name": "bench"}, headers=origin)
            token = {"Authorization": f"Bearer {made.json()['token']}"}
            client.cookies.clear()
            for i in range(proposals):
                mails, posts = len(sink.arrivals), len(hooks)
                body = {
                    "conversation_id": f"bench-{i}",
                    "title": "Bench",
                    "plan": "Count the deals.",
                    "code": "print(1)",
                    "datasets": ["deals"],
                    "files": [],
                }
                sent = time.monotonic()
                r = await client.post("/api/runs", json=body, headers=token)
                assert r.status_code == 201, r.text
                deadline = sent + WAIT_SECONDS
                while len(sink.arrivals) < mails + len(APPROVERS) or len(hooks) < posts + 1:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"proposal {i}: its messages did not all arrive in {WAIT_SECONDS:.0f} s"
                        )
                    sink.changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(sink.changed.wait(), 0.02)
                got = sink.arrivals[mails:]
                assert sorted(to for _, rcpt in got for to in rcpt) == sorted(APPROVERS), got
                latencies.append((max(at for at, _ in got) - sent) * 1000)
                hook_latencies.append((hooks[posts] - sent) * 1000)
    finally:
        smtp.close()
        receiver.shutdown()
        receiver.server_close()
    return {
        "proposals": proposals,
        "inbox_ms_p50": round(statistics.median(latencies), 1),
        "inbox_ms_max": round(max(latencies), 1),
        "webhook_ms_p50": round(statistics.median(hook_latencies), 1),
        "webhook_ms_max": round(max(hook_latencies), 1),
        "goal_ms": 5000,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def bench_notify(proposals: int = PROPOSALS) -> dict[str, Any]:
    from backend.settings import get_settings

    root = Path(tempfile.mkdtemp(prefix="cleanroom-bench-notify-"))
    keys = ("CLEANROOM_DATA_DIR", "CLEANROOM_SMTP_HOST", "CLEANROOM_SMTP_PORT", "CLEANROOM_SMTP_STARTTLS")
    keys += ("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "CLEANROOM_ALLOWED_HOSTS")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["CLEANROOM_DATA_DIR"] = str(root / "data")
    get_settings.cache_clear()
    try:
        return asyncio.run(_bench(f"sqlite:///{root / 'bench.sqlite3'}", proposals))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()
        shutil.rmtree(root, ignore_errors=True)
