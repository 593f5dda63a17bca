"""Each company's own audit chain: an entry also names the hash of its company's previous entry, so a
company admin verifies their company's entries without reading anyone else's. Written by hand (additive;
entries written before it keep a NULL and are checked by their own hash only)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import Varchar
from piccolo.columns.indexes import IndexMethod

ID = "2026-11-30T21:40:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "per-company audit chain link"


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_column(
        table_class_name="AuditEntry",
        tablename="audit_entry",
        column_name="company_prev_hash",
        db_column_name="company_prev_hash",
        column_class_name="Varchar",
        column_class=Varchar,
        params={
            "length": 64,
            "default": None,
            "null": True,
            "primary_key": False,
            "unique": False,
            "index": False,
            "index_method": IndexMethod.btree,
            "choices": None,
            "db_column_name": None,
            "secret": False,
        },
        schema=None,
    )
    return manager
