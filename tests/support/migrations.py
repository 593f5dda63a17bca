"""Running the Piccolo migrations up to a point on a bare database, with raw SQL beside them."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os

from piccolo.apps.migrations.commands.forwards import run_forwards
from piccolo.apps.migrations.tables import Migration
from piccolo.querystring import QueryString

from backend import db

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


async def _sql(sql: str, *values: object) -> None:
    await db.engine().run_querystring(QueryString(sql, *values))


async def _migrate(to: str) -> None:
    Migration._meta.db = db.engine()
    os.environ["PICCOLO_CONF"] = "backend.piccolo_conf"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        done = await run_forwards(app_name="cleanroom", migration_id=to, fake=False)
    assert done.success, (done.message, out.getvalue())


async def _acme_and_alice() -> None:
    """Company 1 and its user 1, as the tables stood before the reshape (later columns take defaults)."""
    await _sql(
        "INSERT INTO company (name, plan, credit_pool, code_execution_enabled, assistant_write_enabled, "
        "followup_without_reapproval, followup_grant_hours, followup_grant_max_runs) "
        "VALUES ('Acme', 'team', 10, true, true, false, 1, 1)"
    )
    await _sql(
        "INSERT INTO app_user (company, email, name, title, password_hash, role, active, created_at) "
        "VALUES (1, 'alice@acme.example', 'Alice', '', 'x', 'member', true, {})",
        T0,
    )
