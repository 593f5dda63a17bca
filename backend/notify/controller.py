"""/api/me/notifications (a person's own preferences) and /api/company/webhooks (a company admin's
endpoints): a person's in a session, never an API token's."""

from __future__ import annotations

from litestar import Controller, delete, get, post, put
from litestar.di import Provide

from backend.notify import admin
from backend.notify.schemas import NewWebhook, Preferences, PreferencesBody, WebhookBody, WebhookInfo
from backend.tenancy.auth import AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext


class NotificationsController(Controller):
    path = "/api"
    tags = ["notifications"]
    dependencies = {"user": Provide(provide_user)}

    @get("/me/notifications")
    async def preferences(self, user: UserContext) -> Preferences:
        """Your own preferences: mail on or off, the events you are not told of, and every event's name."""
        return await admin.preferences(user)

    @put("/me/notifications", opt=AUDITOR_OK)
    async def set_preferences(self, user: UserContext, data: PreferencesBody) -> Preferences:
        """Change your own preferences (an auditor too: it decides nothing); a field left out is kept."""
        return await admin.set_preferences(user, data.email_enabled, data.muted)

    @get("/company/webhooks")
    async def webhooks(self, user: UserContext) -> list[WebhookInfo]:
        return await admin.list_webhooks(user)

    @post("/company/webhooks", status_code=201)
    async def create_webhook(self, user: UserContext, data: WebhookBody) -> NewWebhook:
        """A company admin adds an endpoint; its signing secret is in this answer only."""
        return await admin.create_webhook(user, data.url, data.events)

    @delete("/company/webhooks/{webhook_id:int}", status_code=204)
    async def delete_webhook(self, user: UserContext, webhook_id: int) -> None:
        await admin.delete_webhook(user, webhook_id)
