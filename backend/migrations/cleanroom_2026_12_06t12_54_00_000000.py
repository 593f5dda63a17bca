"""oauth_client.registered_from: the hash of the address bucket an assistant registered from, so open
registration (RFC 7591) is counted per address (backend/tenancy/oauth.py registration_refused). Written by hand
(one column)."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T12:54:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "oauth_client.registered_from: registrations counted per address"

COLUMNS = [
    ("OAuthClient", "oauth_client", "registered_from", Varchar, params("", length=64, index=True)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
