"""How many active webhook endpoints a company has (`Company.webhook_endpoints`, backend/notify): an event of a
company with none, on an installation that sends no mail, costs no query. Written by hand (one column)."""

from piccolo.columns.column_types import Integer

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T06:59:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "company.webhook_endpoints"

COLUMNS = [("Company", "company", "webhook_endpoints", Integer, params(0))]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
