"""Who is told of what, and the outbox that tells them.

`emit` is called by the action that makes an event (a run proposed, a run ended, a schedule paused, a charge,
a host lost) once that action has committed. It writes one `Notification` row per recipient (a person's
e-mail, a company's webhook endpoint) and starts sending them in the background; it never raises and never
waits for a mail server or a receiver: an outbox row that fails is retried with backoff (`delivery`), first at
once, then by every serving process's notifier loop. What a message says is ids, a status and the link to the
console page (`compose`): never a title, plan, code, record value or another person's data, because none of
those is the message's to carry (the page shows what its reader may read).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from backend import clock
from backend.settings import get_settings
from backend.tenancy import mail
from backend.tenancy.tables import Company, User

log = logging.getLogger("cleanroom.notify")

ADMIN, AUDITOR = "admin", "auditor"


@dataclass(frozen=True)
class Event:
    name: str
    label: str  # what the preferences page calls it
    subject: str  # the mail's subject, formatted with the Notice's fields


EVENTS: dict[str, Event] = {
    e.name: e
    for e in (
        Event("run.awaiting_approval", "A run waits for your approval", "Run #{id} waits for your approval"),
        Event("flow.awaiting_approval", "A flow waits for your approval", "Flow #{id} waits for your approval"),
        Event("run.finished", "Your run finished", "Your run #{id} finished"),
        Event("run.failed", "Your run failed", "Your run #{id} ended {status}"),
        Event(
            "changes.awaiting_decision",
            "Proposed changes wait for you",
            "Run #{id} proposed {count} change(s) that wait for you",
        ),
        Event("schedule.failed", "A schedule's firing failed", "Schedule #{id} could not fire and is paused"),
        Event(
            "credits.pool_80",
            "The company's credit pool is 80 % used",
            "{company}'s credit pool is 80 % used",
        ),
        Event(
            "credits.pool_100", "The company's credit pool is used up", "{company}'s credit pool is used up"
        ),
        Event("worker.lost", "A worker host was lost", "A worker host was lost"),
    )
}


@dataclass
class Notice:
    """One event as its messages tell it: nothing here may be anything the recipient could not read."""

    event: str
    company_id: int | None
    subject_type: str  # run | schedule | credits | worker
    subject_id: int | str | None
    path: str  # the console page of the thing, e.g. /runs/12
    status: str = ""
    count: int = 0
    runs: tuple[int, ...] = ()  # worker.lost: this company's runs it held


def console_link(path: str) -> str:
    return f"{get_settings().effective_console_url.rstrip('/')}{path}"


def compose_mail(notice: Notice, company: str) -> tuple[str, str]:
    """(subject, text) of the mail: the event in words, the link, and where to change what one is told."""
    fields = {"id": notice.subject_id, "status": notice.status.replace("_", " "), "count": notice.count}
    subject = "[Cleanroom] " + EVENTS[notice.event].subject.format(company=company, **fields)
    lines = [EVENTS[notice.event].subject.format(company=company, **fields) + f" ({company})."]
    if notice.runs:
        lines.append("Runs it held: " + ", ".join(f"#{r}" for r in notice.runs) + ".")
    if notice.subject_type == "worker" and notice.subject_id:  # the operator's own mail names the host
        lines.append(f"Host: {notice.subject_id}.")
    lines += [
        "",
        f"Open it: {console_link(notice.path)}",
        "",
        f"Choose what you are told of: {console_link('/account')}",
    ]
    return subject, "\n".join(lines) + "\n"


def compose_webhook(notice: Notice, occurred_at: str) -> dict[str, Any]:
    """The webhook's JSON body (its `id` is added per delivery): the same facts as the mail, as fields."""
    body: dict[str, Any] = {
        "event": notice.event,
        "company_id": notice.company_id,
        "subject": {"type": notice.subject_type, "id": notice.subject_id},
        "url": console_link(notice.path),
        "occurred_at": occurred_at,
    }
    if notice.status:
        body["status"] = notice.status
    if notice.count:
        body["count"] = notice.count
    if notice.runs:
        body["runs"] = list(notice.runs)
    return body


# ---- recipients ------------------------------------------------------------------------------------------


async def approvers(company_id: int, requester: int) -> list[int]:
    """Who may approve a run of `requester` (runs/read.py `can_decide`): its requester and the company's
    admins, active, never an auditor (an auditor decides nothing)."""
    rows = await User.select(User.id).where(
        (User.company == company_id)
        & (User.active == True)  # noqa: E712 - Piccolo's column comparison
        & (User.role != AUDITOR)
        & ((User.id == requester) | (User.role == ADMIN))
    )
    return [r["id"] for r in rows]


async def admins(company_id: int) -> list[int]:
    rows = await User.select(User.id).where(
        (User.company == company_id) & (User.active == True) & (User.role == ADMIN)  # noqa: E712
    )
    return [r["id"] for r in rows]


async def _mail_rows(notice: Notice, people: Iterable[int], company: str) -> list[dict[str, Any]]:
    from backend.notify.tables import NotificationPreference

    ids = sorted(set(people))
    if not ids:
        return []
    users = await User.select(User.id, User.email).where(
        User.id.is_in(ids) & (User.company == notice.company_id) & (User.active == True)  # noqa: E712
    )
    prefs = {
        p["user"]: p
        for p in await NotificationPreference.select(
            NotificationPreference.user, NotificationPreference.email_enabled, NotificationPreference.muted
        )
        .where(NotificationPreference.user.is_in(ids))
        .output(load_json=True)
    }
    subject, text = compose_mail(notice, company)
    rows = []
    for user in users:
        pref = prefs.get(user["id"])
        if pref is not None and (not pref["email_enabled"] or notice.event in (pref["muted"] or [])):
            continue
        rows.append(
            {
                "channel": "email",
                "user": user["id"],
                "address": user["email"],
                "subject": subject,
                "body": text,
            }
        )
    return rows


async def _webhook_rows(notice: Notice, now: Any) -> list[dict[str, Any]]:
    from backend.notify.tables import WebhookEndpoint

    if notice.company_id is None:
        return []
    endpoints = (
        await WebhookEndpoint.select(WebhookEndpoint.id, WebhookEndpoint.events)
        .where((WebhookEndpoint.company == notice.company_id) & (WebhookEndpoint.active == True))  # noqa: E712
        .output(load_json=True)
    )
    body = json.dumps(compose_webhook(notice, now.isoformat()), sort_keys=True)
    return [
        {"channel": "webhook", "endpoint": e["id"], "subject": notice.event, "body": body}
        for e in endpoints
        if not e["events"] or notice.event in e["events"]
    ]


People = Iterable[int] | Callable[[], Awaitable[list[int]]]


async def emit(
    notice: Notice, people: People = (), *, operator: bool = False, company: dict[str, Any] | None = None
) -> int:
    """Queue the messages of one event: a mail to each of `people` (of the notice's company, active, who did
    not turn it off; a function is called only when mail is sent at all), a POST to each of the company's
    endpoints subscribed to it, and with `operator` a mail to each of the settings' `notify_operator_emails`.
    `company`: the company's row when the caller has it (a proposal's request read it with the caller); with
    no SMTP set and no endpoint, an event then costs no query. Returns how many were queued; never raises (a
    failure is logged: the action that made the event stands)."""
    try:
        return await _emit(notice, people, operator, company)
    except Exception:
        log.exception("notifications of %s %s were not queued", notice.event, notice.subject_id)
        return 0


async def _emit(notice: Notice, people: People, operator: bool, company: dict[str, Any] | None) -> int:
    from backend.notify import delivery
    from backend.notify.tables import Notification

    if company is None and notice.company_id is not None:
        company = (
            await Company.select(Company.name, Company.webhook_endpoints)
            .where(Company.id == notice.company_id)
            .first()
        )
        if company is None:
            return 0
    mailing, hooks = mail.configured(), bool(company and company.get("webhook_endpoints"))
    if not mailing and not hooks:
        return 0
    now = clock.now()
    name = company["name"] if company else ""
    rows: list[dict[str, Any]] = []
    if mailing:
        ids = await people() if callable(people) else list(people)
        rows += await _mail_rows(notice, ids, name)
        if operator:
            subject, text = compose_mail(notice, name or "this installation")
            rows += [
                {"channel": "email", "address": address, "subject": subject, "body": text}
                for address in get_settings().notify_operator_emails
            ]
    if hooks:
        rows += await _webhook_rows(notice, now)
    if not rows:
        return 0
    made = [
        Notification(
            company=notice.company_id,
            event=notice.event,
            status="pending",
            attempts=0,
            next_attempt_at=now,
            created_at=now,
            **row,
        )
        for row in rows
    ]
    await Notification.insert(*made)
    delivery.kick()
    return len(made)


def event_names() -> list[str]:
    return list(EVENTS)
