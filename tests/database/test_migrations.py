"""The migrations in backend/migrations build exactly the tables the code defines: the same columns with the
same types and nullability, the same indexes (unique or not), the same foreign keys with the same ON DELETE
and ON UPDATE, and (PostgreSQL) the same triggers running the same functions, on SQLite and on PostgreSQL.

The reference is the engine's own DDL for the table definitions (`create_tables_without_migrations` in a
second, empty database); both databases are then read back from the engine's catalogue, so a type is
compared as the engine stores it, not as either side spells it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from piccolo.engine.base import Engine
from piccolo.querystring import QueryString

from backend import db
from tests.support.databases import POSTGRES_URL, _admin_sql, _with_db

Schema = dict[str, dict[str, Any]]  # table -> {"columns": {name: (type, nullable)}, "indexes": {...}}


async def _rows(engine: Engine, sql: str, *args: Any) -> list[dict[str, Any]]:
    return await engine.run_querystring(QueryString(sql, *args))


async def _sqlite_table(engine: Engine, table: str) -> dict[str, Any]:
    columns = {
        r["name"]: (r["type"].upper(), not r["notnull"] and not r["pk"], bool(r["pk"]))
        for r in await _rows(engine, f'SELECT * FROM pragma_table_info("{table}")')
    }
    indexes = set()
    for index in await _rows(engine, f'SELECT * FROM pragma_index_list("{table}")'):
        names = await _rows(engine, f'SELECT name FROM pragma_index_info("{index["name"]}") ORDER BY seqno')
        indexes.add((tuple(r["name"] for r in names), bool(index["unique"])))
    foreign_keys = {
        (r["from"], r["table"], r["on_delete"], r["on_update"])
        for r in await _rows(engine, f'SELECT * FROM pragma_foreign_key_list("{table}")')
    }
    return {"columns": columns, "indexes": indexes, "foreign_keys": foreign_keys, "triggers": set()}


async def _postgres_table(engine: Engine, table: str) -> dict[str, Any]:
    columns = {
        r["column_name"]: (
            f"{r['data_type']}({r['character_maximum_length'] or ''},{r['numeric_precision'] or ''},"
            f"{r['numeric_scale'] or ''})",
            r["is_nullable"] == "YES",
            r["is_pk"],
        )
        for r in await _rows(
            engine,
            "SELECT c.column_name, c.data_type, c.character_maximum_length, c.numeric_precision, "
            "c.numeric_scale, c.is_nullable, EXISTS (SELECT 1 FROM information_schema.key_column_usage k "
            "JOIN information_schema.table_constraints tc ON tc.constraint_name = k.constraint_name "
            "AND tc.constraint_type = 'PRIMARY KEY' WHERE k.table_name = c.table_name "
            "AND k.column_name = c.column_name) AS is_pk "
            "FROM information_schema.columns c WHERE c.table_schema = 'public' AND c.table_name = {}",
            table,
        )
    }
    indexes = {
        (tuple(r["columns"].split(",")), r["unique"], r["method"])
        for r in await _rows(
            engine,
            "SELECT ix.indisunique AS unique, am.amname AS method, "
            "array_to_string(array_agg(a.attname ORDER BY k.ord), ',') AS columns "
            "FROM pg_class t JOIN pg_index ix ON t.oid = ix.indrelid "
            "JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_am am ON am.oid = i.relam "
            "CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord) "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "WHERE t.relname = {} AND n.nspname = 'public' "
            "GROUP BY i.relname, ix.indisunique, am.amname",
            table,
        )
    }
    return {"columns": columns, "indexes": indexes}


async def _postgres_keys_and_triggers(engine: Engine) -> dict[str, dict[str, set[tuple[str, ...]]]]:
    """Each table's FOREIGN KEYs as PostgreSQL reads them back (with their ON DELETE), and its own triggers
    (dataset_row's reference checks) with the source of the function each runs, so a migration's copy of a
    function is compared too: two queries for the whole database."""
    out: dict[str, dict[str, set[tuple[str, ...]]]] = {}
    for kind, sql in (
        (
            "foreign_keys",
            "SELECT t.relname AS table, pg_get_constraintdef(c.oid) AS definition, '' AS source "
            "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE c.contype = 'f' AND n.nspname = 'public'",
        ),
        (
            "triggers",
            "SELECT t.relname AS table, pg_get_triggerdef(g.oid) AS definition, p.prosrc AS source "
            "FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace JOIN pg_proc p ON p.oid = g.tgfoid "
            "WHERE NOT g.tgisinternal AND n.nspname = 'public'",
        ),
    ):
        for r in await _rows(engine, sql):
            table = out.setdefault(r["table"], {"foreign_keys": set(), "triggers": set()})
            table[kind].add((r["definition"], r["source"]) if kind == "triggers" else (r["definition"],))
    return out


async def _schema(url: str) -> Schema:
    engine = db.make_engine(url)
    if not url.startswith("postgres"):
        return {t._meta.tablename: await _sqlite_table(engine, t._meta.tablename) for t in db.all_tables()}
    keys = await _postgres_keys_and_triggers(engine)
    return {
        t._meta.tablename: {
            **await _postgres_table(engine, t._meta.tablename),
            **keys.get(t._meta.tablename, {"foreign_keys": set(), "triggers": set()}),
        }
        for t in db.all_tables()
    }


@pytest.fixture
async def defined_db(engine: str, tmp_path: Path) -> AsyncIterator[str]:
    """A second database holding the tables exactly as the code defines them, without migrations."""
    if engine == "postgres":
        name = f"t_defined_{uuid.uuid4().hex[:10]}"
        await _admin_sql(f'CREATE DATABASE "{name}"')
        url = _with_db(POSTGRES_URL or "", name)
    else:
        url = f"sqlite:///{tmp_path / 'defined.sqlite3'}"
    yield url
    if engine == "postgres":
        await _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _differences(migrated: Schema, defined: Schema) -> dict[str, Any]:
    problems: dict[str, Any] = {}
    for table, want in defined.items():
        have = migrated.get(
            table, {"columns": {}, "indexes": set(), "foreign_keys": set(), "triggers": set()}
        )
        columns = {
            name: {"migrations": have["columns"].get(name), "tables": spec}
            for name, spec in want["columns"].items()
            if have["columns"].get(name) != spec
        }
        columns.update(
            {
                n: {"migrations": s, "tables": None}
                for n, s in have["columns"].items()
                if n not in want["columns"]
            }
        )
        indexes = {
            "missing": sorted(want["indexes"] - have["indexes"]),
            "extra": sorted(have["indexes"] - want["indexes"]),
        }
        # foreign keys (with their ON DELETE) and triggers: the same on both sides, or both listed
        others = {
            kind: {"migrations": sorted(have.get(kind, set())), "tables": sorted(want.get(kind, set()))}
            for kind in ("foreign_keys", "triggers")
            if have.get(kind, set()) != want.get(kind, set())
        }
        if columns or indexes["missing"] or indexes["extra"] or others:
            problems[table] = {"columns": columns, "indexes": indexes, **others}
    return problems


async def test_migrations_build_the_tables_the_code_defines(empty_db: str, defined_db: str) -> None:
    migrated = await _schema(empty_db)
    db.configure(defined_db)
    try:
        await db.create_tables_without_migrations()
        defined = await _schema(defined_db)
    finally:
        db.configure(empty_db)
    assert set(defined) <= set(migrated)
    problems = _differences(migrated, defined)
    assert not problems, f"write a migration (piccolo migrations new cleanroom --auto): {problems}"


def test_positive_control_a_changed_type_nullability_or_index_is_caught() -> None:
    defined: Schema = {
        "deal": {
            "columns": {"id": ("INTEGER", False, True), "name": ("VARCHAR(200)", True, False)},
            "indexes": {(("name",), False)},
        }
    }
    assert not _differences(defined, defined)
    for column, index in [
        (("VARCHAR(100)", True, False), (("name",), False)),  # the type
        (("VARCHAR(200)", False, False), (("name",), False)),  # the nullability
        (("VARCHAR(200)", True, False), (("name",), True)),  # the index became unique
    ]:
        migrated = {"deal": {"columns": {**defined["deal"]["columns"], "name": column}, "indexes": {index}}}
        assert "deal" in _differences(migrated, defined)
    no_index = {"deal": {"columns": defined["deal"]["columns"], "indexes": set()}}
    assert _differences(no_index, defined)["deal"]["indexes"]["missing"] == [(("name",), False)]
    # a foreign key whose ON DELETE differs (a deleted team's rows cascading away instead of kept) is caught
    keyed = {"deal": {**defined["deal"], "foreign_keys": {("team", "team", "SET NULL", "CASCADE")}}}
    cascading = {"deal": {**defined["deal"], "foreign_keys": {("team", "team", "CASCADE", "CASCADE")}}}
    assert not _differences(keyed, keyed)
    assert _differences(cascading, keyed)["deal"]["foreign_keys"]["migrations"] == [
        ("team", "team", "CASCADE", "CASCADE")
    ]
