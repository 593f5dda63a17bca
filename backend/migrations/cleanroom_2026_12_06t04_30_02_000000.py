"""The platform charges filed before idempotency was keyed per credential (issue 52, D-L4): `token_key` held
the platform's key; it moves to `idempotency_key` and `token_key` becomes the digest of the credential's id
and the key, as `backend.credits.platform.token_key` makes it."""

import hashlib

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-06T04:30:02:000000"
VERSION = "1.38.0"
DESCRIPTION = "platform charges filed before: their key, and its digest with the credential"


def _token_key(token_id: int, key: str) -> str:
    """A copy of `platform.token_key` as it was when this was written (a migration must keep its meaning)."""
    return hashlib.sha256(f"{token_id}\n{key}".encode()).hexdigest()


async def _backfill() -> None:
    engine = engine_finder()
    assert engine is not None
    rows = await engine.run_querystring(
        QueryString(
            'SELECT "id", "token_id", "token_key" FROM "platform_charge" WHERE "idempotency_key" = \'\''
        )
    )
    for row in rows:
        await engine.run_querystring(
            QueryString(
                'UPDATE "platform_charge" SET "idempotency_key" = {}, "token_key" = {} WHERE "id" = {}',
                row["token_key"],
                _token_key(row["token_id"], row["token_key"]),
                row["id"],
            )
        )


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_backfill)
    return manager
