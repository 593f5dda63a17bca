"""A person's own preferences, and a company admin's webhook endpoints (created, listed, removed)."""

from __future__ import annotations

from typing import Any

from piccolo.query.functions.aggregate import Count

from backend import clock
from backend.audit import service as audit
from backend.errors import Invalid, NotFound
from backend.notify import webhooks
from backend.notify.events import EVENTS
from backend.notify.schemas import EventInfo, NewWebhook, Preferences, WebhookInfo
from backend.notify.tables import Notification, NotificationPreference, WebhookEndpoint
from backend.records.sync import seal
from backend.tenancy import mail
from backend.tenancy.context import UserContext
from backend.tenancy.people import require_admin
from backend.tenancy.tables import Company


def _events(names: list[str], field: str) -> list[str]:
    unknown = sorted(set(names) - set(EVENTS))
    if unknown:
        raise Invalid(f"{field}: unknown event(s) {', '.join(unknown)}; events: {', '.join(EVENTS)}")
    return sorted(set(names))


async def preferences(ctx: UserContext) -> Preferences:
    """The caller's own (a session's person; there is no route to anyone else's)."""
    row = (
        await NotificationPreference.select()
        .where(NotificationPreference.user == ctx.user_id)
        .output(load_json=True)
        .first()
    )
    return Preferences(
        email_enabled=True if row is None else row["email_enabled"],
        muted=[] if row is None else list(row["muted"] or []),
        events=[EventInfo(name=e.name, label=e.label) for e in EVENTS.values()],
        mail_configured=mail.configured(),
    )


async def set_preferences(
    ctx: UserContext, email_enabled: bool | None, muted: list[str] | None
) -> Preferences:
    ctx.require_person("changing what you are told of")
    current = await preferences(ctx)
    values: dict[str, Any] = {
        "email_enabled": current.email_enabled if email_enabled is None else email_enabled,
        "muted": current.muted if muted is None else _events(muted, "muted"),
    }
    updated = (
        await NotificationPreference.update(
            {
                NotificationPreference.email_enabled: values["email_enabled"],
                NotificationPreference.muted: values["muted"],
                NotificationPreference.updated_at: clock.now(),
            }
        )
        .where(NotificationPreference.user == ctx.user_id)
        .returning(NotificationPreference.id)
    )
    if not updated:
        await NotificationPreference.insert(
            NotificationPreference(user=ctx.user_id, updated_at=clock.now(), **values)
        )
    return await preferences(ctx)


async def _counts(company_id: int) -> dict[tuple[int, str], int]:
    rows = (
        await Notification.select(Notification.endpoint, Notification.status, Count(alias="n"))
        .where((Notification.company == company_id) & (Notification.channel == "webhook"))
        .group_by(Notification.endpoint, Notification.status)
    )
    return {(r["endpoint"], r["status"]): r["n"] for r in rows}


def _info(row: dict[str, Any], counts: dict[tuple[int, str], int]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "url": row["url"],
        "events": list(row["events"] or []),
        "active": row["active"],
        "created_by": row["created_by"],
        "created_at": row["created_at"],
        "delivered": counts.get((row["id"], "sent"), 0),
        "failing": counts.get((row["id"], "pending"), 0) + counts.get((row["id"], "failed"), 0),
    }


async def list_webhooks(ctx: UserContext) -> list[WebhookInfo]:
    require_admin(ctx, "webhooks")
    rows = (
        await WebhookEndpoint.select()
        .where((WebhookEndpoint.company == ctx.company_id) & (WebhookEndpoint.active == True))  # noqa: E712
        .order_by(WebhookEndpoint.id)
        .output(load_json=True)
    )
    counts = await _counts(ctx.company_id)
    return [WebhookInfo(**_info(r, counts)) for r in rows]


async def create_webhook(ctx: UserContext, url: str, events: list[str]) -> NewWebhook:
    """A new endpoint of the admin's own company; its secret is returned this once and stored sealed."""
    require_admin(ctx, "webhooks")
    url = url.strip()
    await webhooks.check_destination(url)
    names = _events(events, "events")
    secret = webhooks.new_secret()
    now = clock.now()
    async with audit.atomic():
        endpoint = WebhookEndpoint(
            company=ctx.company_id,
            url=url,
            secret_sealed=seal(secret),
            events=names,
            active=True,
            created_by=ctx.actor,
            created_at=now,
        )
        await endpoint.save()
        await Company.update({Company.webhook_endpoints: Company.webhook_endpoints + 1}).where(
            Company.id == ctx.company_id
        )
        await audit.record(
            "webhook.created",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="webhook",
            subject_id=endpoint.id,
            data={"url": url, "events": names},
        )
    row = (
        await WebhookEndpoint.select().where(WebhookEndpoint.id == endpoint.id).output(load_json=True).first()
    )
    assert row is not None  # inserted above, in this transaction
    return NewWebhook(**_info(row, {}), secret=secret)


async def delete_webhook(ctx: UserContext, webhook_id: int) -> None:
    """Remove an endpoint of the admin's own company (another company's: 404, as a missing one); its
    pending messages are not sent."""
    require_admin(ctx, "webhooks")
    async with audit.atomic():
        gone = (
            await WebhookEndpoint.update({WebhookEndpoint.active: False})
            .where(
                (WebhookEndpoint.id == webhook_id)
                & (WebhookEndpoint.company == ctx.company_id)
                & (WebhookEndpoint.active == True)  # noqa: E712
            )
            .returning(WebhookEndpoint.id)
        )
        if not gone:
            raise NotFound(f"no webhook {webhook_id}")
        await Company.update({Company.webhook_endpoints: Company.webhook_endpoints - 1}).where(
            Company.id == ctx.company_id
        )
        await audit.record(
            "webhook.removed",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="webhook",
            subject_id=webhook_id,
        )
