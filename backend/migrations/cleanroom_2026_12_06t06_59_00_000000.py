"""Notifications (`notify.tables`, issue 56): a person's preferences, a company's webhook endpoints and the
outbox every mail and webhook goes through; frozen copies of the tables as they were when this was written,
created with the engine's own DDL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns import JSON, Boolean, ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.engine.finder import engine_finder
from piccolo.table import Table


# the referenced tables as this migration sees them: only their names (and Piccolo's serial id) matter here
class Company(Table, tablename="company"):
    pass


class User(Table, tablename="app_user"):
    pass


ID = "2026-12-06T06:59:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "notification_preference, webhook_endpoint, notification: people told when they are needed"


class NotificationPreference(Table, tablename="notification_preference"):
    user = ForeignKey(references=User, null=False, unique=True)
    email_enabled = Boolean(default=True)
    muted = JSON(default=[])
    updated_at = Timestamptz()


class WebhookEndpoint(Table, tablename="webhook_endpoint"):
    company = ForeignKey(references=Company, null=False, index=True)
    url = Varchar(length=2000)
    secret_sealed = Text()
    events = JSON(default=[])
    active = Boolean(default=True)
    created_by = Varchar(length=300)
    created_at = Timestamptz()


class Notification(Table, tablename="notification"):
    company = ForeignKey(references=Company, null=True, default=None, index=True)
    event = Varchar(length=40)
    channel = Varchar(length=10)
    user = ForeignKey(references=User, null=True, default=None)
    endpoint = ForeignKey(references=WebhookEndpoint, null=True, default=None)
    address = Varchar(length=300, default="")
    subject = Varchar(length=300, default="")
    body = Text(default="")
    status = Varchar(length=10, default="pending", index=True)
    attempts = Integer(default=0)
    next_attempt_at = Timestamptz(index=True)
    last_error = Varchar(length=300, default="")
    created_at = Timestamptz()
    sent_at = Timestamptz(null=True, default=None)


async def _create() -> None:
    engine = engine_finder()
    assert engine is not None
    for table in (Company, User, NotificationPreference, WebhookEndpoint, Notification):
        table._meta.db = engine  # the database being migrated, not the one found when this module loaded
    for table in (NotificationPreference, WebhookEndpoint, Notification):
        await table.create_table(if_not_exists=True)


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_create)
    return manager
