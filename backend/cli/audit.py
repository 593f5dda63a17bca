from __future__ import annotations

from pathlib import Path

import typer

from backend.cli.support import fail, group, require_database, run_db

EXIT_BEHIND = 3  # `audit verify`: a restored backup behind its anchor, not yet recorded (1: broken)


async def _at_head() -> None:
    """The trail is read with this version's tables: a database not migrated yet (a restored older backup,
    an upgrade half done) is refused with what to run, never read wrongly."""
    from backend import db

    if pending := await db.pending_migrations():
        fail(
            f"the database is not at this version's schema ({len(pending)} migration(s) wait): run `cleanroom migrate`"
        )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    audit_app = group("The hash-chained audit trail.")
    app.add_typer(audit_app, name="audit")

    @audit_app.command("verify")
    def verify() -> None:
        """Check every entry's hash and link (in the hash form it was written with), and every entry against
        the anchor in the data directory, whose signed head must verify (deleting the newest entries, or
        rewriting or slipping in one, is noticed); exit 1 naming the first bad entry. A database restored
        from a backup (`cleanroom backup`) ends before its anchor: exit 3, saying so and what was lost, until
        `cleanroom audit restored` records it; every later verify names the restores. A database that is not
        there, or entries with no anchor kept for them, is an error, never an empty OK."""
        from backend.audit import anchor, service

        require_database()

        async def check() -> tuple[service.VerifyResult, str, list[anchor.Restore]]:
            await _at_head()
            return await service.verify(), str(anchor.path()), anchor.restores()

        result, anchor_file, restores = run_db(check, create=False)
        if result.ok and result.checked and not Path(anchor_file).exists():
            fail(
                f"{result.checked} audit entries but no anchor at {anchor_file}: the database was moved or "
                "restored to a new path or DSN, and nothing outside it vouches for its newest entries "
                "(docs/operating.md)"
            )
        if result.ok:
            typer.echo(f"audit chain OK: {result.checked} entries, head {result.head_hash or '-'}")
            typer.echo(f"anchor: {anchor_file}" + ("" if Path(anchor_file).exists() else " (none yet)"))
            for restore in restores:
                typer.echo(f"note: {restore.describe()}")
            return
        if result.behind is not None:
            typer.echo(f"audit chain RESTORED, not recorded: {result.reason}", err=True)
            raise typer.Exit(EXIT_BEHIND)
        where = f" at entry #{result.first_bad_seq}" if result.first_bad_seq is not None else ""
        typer.echo(
            f"audit chain BROKEN{where}: {result.reason} ({result.checked} entries before it are intact)",
            err=True,
        )
        raise typer.Exit(1)

    @audit_app.command("restored")
    def restored() -> None:
        """Record that this database was restored from a backup taken by `cleanroom backup` (the step after
        restoring, docs/operating.md): refused unless every entry agrees with the anchor and the database
        ends at that backup's signed point. The anchor then goes on from there, and every `audit verify`
        says which entries were lost."""
        from backend.audit import anchor, service
        from backend.audit.tables import AuditEntry

        require_database()

        async def record() -> anchor.Restore:
            await _at_head()
            result = await service.verify()
            if result.ok:
                fail("the database agrees with its anchor: it is not behind it, nothing to record")
            if result.behind is None:
                fail(f"refused: the database is not a restored backup: {result.reason}")
            table = {r["seq"]: r["hash"] for r in await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)}
            try:
                return anchor.record_restore(table)
            except ValueError as exc:
                fail(str(exc))

        restore = run_db(record, create=False)
        typer.echo(f"recorded: {restore.describe()}")

    @audit_app.command("public-key")
    def public_key() -> None:
        """Print the public key that signs audit exports (base64, what scripts/verify_audit_export.py
        --public-key takes) on standard output, its fingerprint and key file on standard error. The key is
        made on first use (0600), outside the database."""
        from backend.audit import signing

        try:
            text = signing.public_text()
        except signing.KeyProblem as exc:
            fail(str(exc))
        typer.echo(text)
        typer.echo(f"fingerprint {signing.fingerprint()} (key file {signing.key_path()})", err=True)

    @audit_app.command("export")
    def export_(
        company: str = typer.Option(
            None, "--company", help="a company's name or id: its own chain (default: the whole trail)"
        ),
        since: str = typer.Option(None, "--from", help="ISO date or date-time: entries at or after it"),
        until: str = typer.Option(None, "--to", help="ISO date or date-time (a date includes that day)"),
        out: Path = typer.Option(None, "--out", help="write here (mode 0600) instead of standard output"),
    ) -> None:
        """Write audit entries as JSON Lines with the chain's start and head, every entry checked against
        the anchor, the footer signed, streamed (the operator's: every value); check the file anywhere with
        `python3 scripts/verify_audit_export.py FILE --public-key KEY` (no database, no install)."""
        import json
        import os
        import sys

        from backend.audit import export, service
        from backend.tenancy.tables import Company

        async def write() -> int:
            company_id = None
            if company is not None:
                match = Company.id == int(company) if company.isdigit() else Company.name == company
                row = await Company.select(Company.id).where(match).first()
                if row is None:
                    fail(f"no company {company!r}")
                company_id = row["id"]
            plan = await export.plan(
                company_id, export.parse_bound(since, end=False), export.parse_bound(until, end=True)
            )
            await service.record(
                "audit.exported",
                actor="operator",
                company_id=company_id,
                subject_type="audit",
                data={"from": since, "to": until, "first": plan.first_shown, "last": plan.last_shown},
            )
            if out is None:
                target = sys.stdout.buffer
            else:
                fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                target = os.fdopen(fd, "wb")
            line = b"{}"
            try:
                async for line in export.lines(plan):
                    target.write(line)
            finally:
                target.flush()
                if out is not None:
                    target.close()
            return json.loads(line).get("count", 0)  # the footer's

        count = run_db(write)
        if out is not None:
            typer.echo(f"wrote {count} audit entries to {out}", err=True)
