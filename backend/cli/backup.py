"""`cleanroom backup` and `cleanroom restore`: the database, the data directory (Drive files, the console's
secrets, the audit anchor and, when kept there, the signing key) and a signed backup point in the anchor, so a
restore of this backup verifies and says what it lost (backend/audit/anchor.py, docs/operating.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from backend.cli.support import fail, require_database, run_db

SQLITE_FILE = "database.sqlite3"
PG_FILE = "database.pgdump"  # pg_dump's custom format
DATA = "data"
KEY_FILE = "audit-signing-key.pem"  # the signing key, when it is kept outside the data directory
MANIFEST = "MANIFEST.json"
# what of the data directory a backup leaves out: the SQLite database (copied consistently, above), its
# companion and lock files, and the per-run scratch folders
SKIPPED = {"cleanroom.sqlite3", "runs"}
SKIPPED_SUFFIXES = ("-wal", "-shm", "-journal", ".migrate-lock")


def _skip(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIPPED or n.endswith(SKIPPED_SUFFIXES)}


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("backup")
    def backup(dest: Path = typer.Argument(..., help="a new folder to write the backup into")) -> None:
        """Back up the database (SQLite: a consistent copy; PostgreSQL: pg_dump of one snapshot), then mark
        that copy's audit head as a signed backup point in the anchor, then copy the data directory (Drive
        files, console secrets, the anchor, the signing key). Keep it off this host; the anchor and the key
        are what make a restore verifiable."""
        import asyncio
        import os
        import sqlite3

        from backend import db, filemodes
        from backend.audit import anchor, signing
        from backend.audit.tables import AuditEntry
        from backend.settings import get_settings
        from backend.version import VERSION

        require_database()
        if dest.exists():
            fail(f"{dest} exists: a backup goes into a new folder")
        settings = get_settings()
        filemodes.private_dir(dest)
        url = settings.effective_database_url
        table = AuditEntry._meta.tablename

        async def snapshot() -> tuple[int, str | None, str]:
            engine = db.engine()
            taken = anchor.now_text()
            if db.is_postgres():
                import asyncpg

                conn = await asyncpg.connect(engine.config["dsn"])
                try:  # one snapshot: the dump and the head read from it are the same database
                    async with conn.transaction(isolation="repeatable_read", readonly=True):
                        name = await conn.fetchval("SELECT pg_export_snapshot()")
                        row = await conn.fetchrow(f"SELECT seq, hash FROM {table} ORDER BY seq DESC LIMIT 1")
                        proc = await asyncio.create_subprocess_exec(
                            "pg_dump", "--format=custom", f"--snapshot={name}", "--no-owner",
                            f"--file={dest / PG_FILE}", engine.config["dsn"],
                        )  # fmt: skip
                        if await proc.wait() != 0:
                            fail("pg_dump failed (its message is above); nothing was marked")
                finally:
                    await conn.close()
            else:
                target = dest / SQLITE_FILE
                source = sqlite3.connect(engine.path)
                copy = sqlite3.connect(target)
                try:
                    source.backup(copy)  # SQLite's online backup: one consistent copy
                    row = copy.execute(f"SELECT seq, hash FROM {table} ORDER BY seq DESC LIMIT 1").fetchone()
                finally:
                    copy.close()
                    source.close()
                os.chmod(target, filemodes.PRIVATE_FILE)
            seq, entry_hash = (row[0], row[1]) if row else (0, None)
            return seq, entry_hash, taken

        seq, entry_hash, taken = run_db(snapshot, create=False)
        point = anchor.mark_backup(seq, entry_hash, taken)
        shutil.copytree(settings.data_dir, dest / DATA, symlinks=True, ignore=_skip)
        key = signing.key_path()
        if key.exists() and not key.resolve().is_relative_to(settings.data_dir.resolve()):
            shutil.copy2(key, dest / KEY_FILE)
        manifest = {
            "version": VERSION,
            "taken": taken,
            "database": "postgresql" if url.startswith("postgres") else "sqlite",
            "audit_head": {"seq": point.seq, "hash": point.entry_hash},
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        typer.echo(f"backup of cleanroom {VERSION} at {taken} in {dest}: audit trail up to entry #{seq}")

    @app.command("restore")
    def restore(
        source: Path = typer.Argument(..., help="a folder written by `cleanroom backup`"),
        keep_anchor: bool = typer.Option(
            True,
            help="keep this host's audit anchor and signing key where they exist (they are newer than the "
            "backup's: what was lost is then known); --no-keep-anchor takes the backup's (the host's are gone)",
        ),
    ) -> None:
        """Put a backup back, with every service stopped: the database (PostgreSQL: pg_restore --clean into
        DATABASE_URL's database; SQLite: the file), then the data directory's files. Then `cleanroom audit
        verify` says whether the database is behind the anchor (restored: `cleanroom audit restored`
        records it) and `cleanroom migrate` brings an older backup to this version."""
        import os
        import subprocess

        from backend import db, filemodes
        from backend.audit import anchor, signing
        from backend.settings import get_settings

        manifest_file = source / MANIFEST
        if not manifest_file.is_file():
            fail(f"{source} is not a backup written by `cleanroom backup` (no {MANIFEST})")
        manifest = json.loads(manifest_file.read_text())
        settings = get_settings()
        url = settings.effective_database_url
        kind = "postgresql" if url.startswith("postgres") else "sqlite"
        if manifest["database"] != kind:
            fail(f"the backup holds a {manifest['database']} database; the settings name {kind} ({url})")
        filemodes.ensure_dirs(settings.data_dir)
        if kind == "postgresql":
            dsn = db.make_engine(url).config["dsn"]
            done = subprocess.run(
                ["pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction", "-d", dsn,
                 str(source / PG_FILE)],
                check=False,
            )  # fmt: skip
            if done.returncode != 0:
                fail("pg_restore failed (its message is above)")
        else:
            target = Path(url.removeprefix("sqlite:///"))
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            shutil.copy2(source / SQLITE_FILE, target)
            os.chmod(target, filemodes.PRIVATE_FILE)
        kept = []
        live_key = signing.key_path()
        for name in os.listdir(source / DATA):
            here = settings.data_dir / name
            if keep_anchor and name in (anchor.DIRECTORY, signing.DIRECTORY) and here.exists():
                kept.append(str(here))
                continue
            there = source / DATA / name
            if there.is_dir():
                shutil.copytree(there, here, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(there, here)
        if (source / KEY_FILE).exists() and not (keep_anchor and live_key.exists()):
            filemodes.private_dir(live_key.parent)
            shutil.copy2(source / KEY_FILE, live_key)
        typer.echo(f"restored the backup taken at {manifest['taken']} (cleanroom {manifest['version']})")
        if kept:
            typer.echo(f"kept this host's {', '.join(kept)} (newer than the backup's)")
        typer.echo("next: `cleanroom audit verify` (then `cleanroom audit restored`), `cleanroom migrate`")
