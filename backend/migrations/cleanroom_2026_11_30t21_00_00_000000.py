"""A person decides: token scopes, follow-up grants bound to an approved run, login limits per IP,
outputs that keep the dataset permissions of their inputs. Written by hand (small, additive)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import JSON, Integer, Timestamptz, Varchar
from piccolo.columns.indexes import IndexMethod

ID = "2026-11-30T21:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "token scopes, follow-up grants, login attempts per IP, output dataset tags"


def _params(default, *, null: bool = False, index: bool = False) -> dict:
    return {
        "default": default,
        "null": null,
        "primary_key": False,
        "unique": False,
        "index": index,
        "index_method": IndexMethod.btree,
        "choices": None,
        "db_column_name": None,
        "secret": False,
    }


# (table class, table name, column, column class, params)
COLUMNS = [
    ("ApiToken", "api_token", "scope", Varchar, {**_params("assistant"), "length": 20}),
    ("LoginAttempt", "login_attempt", "ip", Varchar, {**_params("", index=True), "length": 64}),
    ("Company", "company", "followup_grant_hours", Integer, _params(24)),
    ("Company", "company", "followup_grant_max_runs", Integer, _params(10)),
    ("Run", "run", "followup_grant_expires_at", Timestamptz, _params(None, null=True)),
    ("Run", "run", "followup_grant_max_runs", Integer, _params(0)),
    ("DriveFile", "drive_file", "source_datasets", JSON, _params("[]")),
    ("DriveFolder", "drive_folder", "source_datasets", JSON, _params("[]")),
]


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    for table_class, tablename, column, column_class, params in COLUMNS:
        manager.add_column(
            table_class_name=table_class,
            tablename=tablename,
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=params,
            schema=None,
        )
    return manager
