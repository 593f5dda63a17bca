"""Per-person preferences, a company's webhook endpoints, and the outbox every message goes through."""

from __future__ import annotations

from piccolo.columns import JSON, Boolean, ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company, User


class NotificationPreference(Table):
    """A person's choices; no row: every event, by e-mail (the default)."""

    user = ForeignKey(references=User, null=False, unique=True)
    email_enabled = Boolean(default=True)
    muted = JSON(default=[])  # event names this person is not told of
    updated_at = Timestamptz()


class WebhookEndpoint(Table):
    """A company's receiver: every event of the company it subscribes to (none named: all), signed with its
    own secret (stored sealed, as a sync source's connection string: records/sync.py `seal`)."""

    company = ForeignKey(references=Company, null=False, index=True)
    url = Varchar(length=2000)
    secret_sealed = Text()
    events = JSON(default=[])  # empty: every event
    active = Boolean(default=True)
    created_by = Varchar(length=300)
    created_at = Timestamptz()


class Notification(Table):
    """One message to one recipient (a person's address, or an endpoint): written when the event happens,
    sent by `notify.delivery` after, retried with backoff until it is sent or its attempts run out. It holds
    only what the message says (ids, statuses, the link), never a record value or code."""

    company = ForeignKey(references=Company, null=True, default=None, index=True)
    event = Varchar(length=40)
    channel = Varchar(length=10)  # email | webhook
    user = ForeignKey(
        references=User, null=True, default=None
    )  # an e-mail's person (checked again at sending)
    endpoint = ForeignKey(references=WebhookEndpoint, null=True, default=None)
    address = Varchar(length=300, default="")  # an e-mail's address (the operator's has no person)
    subject = Varchar(length=300, default="")
    body = Text(default="")  # the mail's text, or the webhook's JSON body
    status = Varchar(length=10, default="pending", index=True)  # pending | sending | sent | failed | dropped
    attempts = Integer(default=0)
    next_attempt_at = Timestamptz(index=True)
    last_error = Varchar(length=300, default="")
    created_at = Timestamptz()
    sent_at = Timestamptz(null=True, default=None)


TABLES = [NotificationPreference, WebhookEndpoint, Notification]
