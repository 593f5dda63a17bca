"""A person decides: token scopes, follow-up grants bound to an approved run, login limits per IP,
outputs that keep the dataset permissions of their inputs. Written by hand (small, additive)."""

from piccolo.columns.column_types import JSON, Integer, Timestamptz, Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-11-30T21:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "token scopes, follow-up grants, login attempts per IP, output dataset tags"

COLUMNS = [
    ("ApiToken", "api_token", "scope", Varchar, params("assistant", length=20)),
    ("LoginAttempt", "login_attempt", "ip", Varchar, params("", index=True, length=64)),
    ("Company", "company", "followup_grant_hours", Integer, params(24)),
    ("Company", "company", "followup_grant_max_runs", Integer, params(10)),
    ("Run", "run", "followup_grant_expires_at", Timestamptz, params(None, null=True)),
    ("Run", "run", "followup_grant_max_runs", Integer, params(0)),
    ("DriveFile", "drive_file", "source_datasets", JSON, params("[]")),
    ("DriveFolder", "drive_folder", "source_datasets", JSON, params("[]")),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
