"""How many active webhook endpoints a company has (`Company.webhook_endpoints`, backend/notify): an event of a
company with none, on an installation that sends no mail, costs no query; and the pool's last threshold its
admins were told of (`Company.pool_told`, backend/credits `tell_pools`). Written by hand (two columns)."""

from piccolo.columns.column_types import Integer, Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T06:59:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "company.webhook_endpoints, company.pool_told"

COLUMNS = [
    ("Company", "company", "webhook_endpoints", Integer, params(0)),
    ("Company", "company", "pool_told", Varchar, params("", length=20)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
