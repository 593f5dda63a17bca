"""The migrations in backend/migrations build exactly the tables the code defines."""

from __future__ import annotations

from piccolo.querystring import QueryString

from backend import db


async def _columns(table_name: str) -> set[str]:
    eng = db.engine()
    if db.is_postgres():
        query = QueryString(
            "SELECT column_name AS name FROM information_schema.columns WHERE table_name = {}", table_name
        )
    else:
        query = QueryString(f'SELECT name FROM pragma_table_info("{table_name}")')
    return {r["name"] for r in await eng.run_querystring(query)}


async def test_every_table_and_column_comes_from_a_migration(empty_db: str) -> None:
    missing = {}
    for table in db.all_tables():
        expected = {c._meta.db_column_name for c in table._meta.columns}
        actual = await _columns(table._meta.tablename)
        if expected != actual:
            missing[table._meta.tablename] = {
                "not in db": sorted(expected - actual),
                "extra": sorted(actual - expected),
            }
    assert not missing, f"write a migration (piccolo migrations new cleanroom --auto): {missing}"
