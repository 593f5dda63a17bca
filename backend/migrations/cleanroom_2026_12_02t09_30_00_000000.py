"""Drive quotas: the bytes a person and a company may keep in Drive, and how many files a person may
upload in an hour (company settings, within the ranges the API allows). Written by hand (small, additive)."""

from piccolo.columns.column_types import Integer

from backend.migrations._columns import add_columns, params

ID = "2026-12-02T09:30:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "drive quotas"

COLUMNS = [
    ("Company", "company", "drive_quota_mb_per_user", Integer, params(2048)),
    ("Company", "company", "drive_quota_mb_per_company", Integer, params(20480)),
    ("Company", "company", "drive_uploads_per_hour", Integer, params(200)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
