"""Sending what the outbox holds: each row claimed by one process (a conditional update), sent, and marked
`sent`; a failure goes back to `pending` with its next attempt later (backoff doubling from
`notify_retry_base_seconds`, at most `notify_max_attempts` attempts), then `failed`. A mail is sent only while
its person is still active in the company (a person deactivated since is `dropped`). Nothing here raises to
its caller and nothing is awaited by the action that made the event: `kick` starts a pass in the background,
and `Notifier` (every serving process) passes again every `notify_poll_seconds` for the retries and for what
a process that stopped left behind (a row left `sending` for `STALE_SENDING` goes back to `pending`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx

from backend import clock
from backend.notify import webhooks
from backend.notify.tables import Notification, WebhookEndpoint
from backend.records.sync import unseal
from backend.settings import get_settings
from backend.tenancy import mail
from backend.tenancy.tables import User

log = logging.getLogger("cleanroom.notify")

STALE_SENDING = timedelta(minutes=5)
BATCH = 50
_tasks: set[asyncio.Task[Any]] = set()


class Undeliverable(Exception):
    """A message that must not be sent at all (not retried): its row ends `dropped`."""


def backoff(attempts: int) -> timedelta:
    """Wait before the next attempt after `attempts` failed ones: base, 2×base, 4×base … capped at an hour."""
    base = get_settings().notify_retry_base_seconds
    return timedelta(seconds=min(3600.0, base * 2 ** max(0, attempts - 1)))


async def _send_mail(row: dict[str, Any]) -> None:
    if row["user"] is not None:
        person = await User.select(User.active, User.company).where(User.id == row["user"]).first()
        if person is None or not person["active"] or person["company"] != row["company"]:
            raise Undeliverable("the person no longer has access")
    if not await mail.send(row["address"], row["subject"], row["body"]):
        raise RuntimeError("the SMTP server did not take it")


async def _send_webhook(row: dict[str, Any]) -> None:
    endpoint = await WebhookEndpoint.select().where(WebhookEndpoint.id == row["endpoint"]).first()
    if endpoint is None or not endpoint["active"] or endpoint["company"] != row["company"]:
        raise Undeliverable("the endpoint was removed")
    try:
        await webhooks.check_destination(endpoint["url"])
    except Exception as exc:  # an address the endpoint may no longer reach: not retried
        raise Undeliverable(str(exc)) from exc
    body = json.dumps({"id": row["id"], **json.loads(row["body"])}, sort_keys=True).encode()
    headers = webhooks.signed_headers(unseal(endpoint["secret_sealed"]), body, row["id"], row["event"])
    timeout = get_settings().notify_webhook_timeout_seconds
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        response = await client.post(endpoint["url"], content=body, headers=headers)
    if not 200 <= response.status_code < 300:
        raise RuntimeError(f"the receiver answered {response.status_code}")


async def send_one(row: dict[str, Any]) -> str:
    """Send one claimed row; returns its new status."""
    now = clock.now()
    try:
        if row["channel"] == "email":
            await _send_mail(row)
        else:
            await _send_webhook(row)
    except Undeliverable as exc:
        await Notification.update(
            {Notification.status: "dropped", Notification.last_error: str(exc)[:300]}
        ).where(Notification.id == row["id"])
        return "dropped"
    except Exception as exc:
        attempts = row["attempts"] + 1
        status = "failed" if attempts >= get_settings().notify_max_attempts else "pending"
        why = f"{type(exc).__name__}: {exc}"[:300]
        log.warning(
            "notification %s (%s, %s) attempt %s failed: %s",
            row["id"],
            row["event"],
            row["channel"],
            attempts,
            why,
        )
        await Notification.update(
            {
                Notification.status: status,
                Notification.attempts: attempts,
                Notification.last_error: why,
                Notification.next_attempt_at: now + backoff(attempts),
            }
        ).where(Notification.id == row["id"])
        return status
    await Notification.update(
        {
            Notification.status: "sent",
            Notification.attempts: row["attempts"] + 1,
            Notification.sent_at: clock.now(),
        }
    ).where(Notification.id == row["id"])
    return "sent"


async def deliver_due(now: Any = None) -> int:
    """One pass: every pending row that is due, claimed and sent (a few at once). Returns how many were
    sent. Rows another process claimed are left to it."""
    now = now or clock.now()
    await Notification.update({Notification.status: "pending"}).where(
        (Notification.status == "sending") & (Notification.next_attempt_at < now - STALE_SENDING)
    )
    due = (
        await Notification.select()
        .where((Notification.status == "pending") & (Notification.next_attempt_at <= now))
        .order_by(Notification.id)
        .limit(BATCH)
    )
    sent = 0
    claimed = []
    for row in due:
        won = (
            await Notification.update({Notification.status: "sending", Notification.next_attempt_at: now})
            .where((Notification.id == row["id"]) & (Notification.status == "pending"))
            .returning(Notification.id)
        )
        if won:
            claimed.append(row)
    for status in await asyncio.gather(*(send_one(row) for row in claimed)):
        sent += status == "sent"
    return sent


async def _pass() -> None:
    try:
        await deliver_due()
    except Exception:
        log.exception("a notification pass failed; the notifier tries again")


def kick() -> None:
    """Start a pass now, in the background of the running event loop (none running: the notifier's next)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(_pass())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def settle() -> None:
    """Wait for the passes started in this loop (tests, the bench, and a process that stops)."""
    loop = asyncio.get_running_loop()
    while mine := [t for t in _tasks if t.get_loop() is loop and not t.done()]:
        await asyncio.gather(*mine, return_exceptions=True)


class Notifier:
    """The retry loop of one serving process; each pass also runs the watchers it was started with (what is
    told by looking rather than by an action: the credit pools, backend/credits `tell_pools`)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._watchers: list[Callable[[], Awaitable[Any]]] = []

    async def _loop(self) -> None:
        while True:
            await _pass()
            for watcher in self._watchers:
                try:
                    await watcher()
                except Exception:
                    log.exception("a notification watcher failed; the notifier tries again")
            await asyncio.sleep(get_settings().notify_poll_seconds)

    def start(self, watchers: list[Callable[[], Awaitable[Any]]] | None = None) -> None:
        self._watchers = list(watchers or [])
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await settle()


NOTIFIER = Notifier()
