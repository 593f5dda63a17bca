"""Importing a file into a company-defined dataset (issue 54, item 3): kinds inferred and shown before anything
is written, a dry run that counts what the import would do, the import itself upserting by the external key
in one transaction with its audit entry (the file's hash and counts, never a value), and the parties who may
not import refused beside the ones who may.

The file is parsed by the confined converter child (backend/convert/rows.py) in the tests that say so; the
others feed rows straight in (`Loader`), to keep the suite fast."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from backend.audit.tables import AuditEntry
from backend.convert.rows import ImportFileRefused, stream_rows
from backend.errors import AppError, Forbidden, Invalid, NotFound
from backend.records import defined, importing
from backend.records.columns import ColumnKind
from backend.records.tables import DatasetRow
from backend.tenancy.context import TOKEN, load_user_context_by_email

CSV = (
    "Ref,Weight,Shipped On,Fragile,Note\n"
    "S-1,12.5,2026-01-02,true,first\n"
    "S-2,3,2026-01-03,false,second\n"
    "S-3,7.25,2026-01-04,true,third\n"
)


def _spec(preview: dict) -> defined.DatasetSpec:
    from backend.records.values import ColumnSpec

    columns = [ColumnSpec.read(c) for c in preview["columns"]]
    return defined.DatasetSpec(name="shipments", label="Shipments", columns=columns, key_column="ref")


async def _rows(dataset_name: str, company_id: int) -> dict[str, dict]:
    ds = await defined.get_defined(company_id, dataset_name)
    rows = await DatasetRow.select(DatasetRow.external_key, DatasetRow.values, DatasetRow.version).where(
        DatasetRow.dataset == ds.id
    )
    out = {}
    for r in rows:
        values = r["values"]
        out[r["external_key"]] = {
            **(json.loads(values) if isinstance(values, str) else values),
            "_version": r["version"],
        }
    return out


@pytest.mark.sqlite
async def test_admin_previews_dry_runs_then_imports_a_csv_and_a_second_import_upserts(
    demo_db: str, tmp_path: Path
) -> None:
    admin = await load_user_context_by_email("admin@acme.example")
    path = tmp_path / "shipments.csv"
    path.write_text(CSV)

    preview = await importing.preview_file(admin, path, "shipments.csv")
    kinds = {c["name"]: c["kind"] for c in preview["columns"]}
    assert kinds == {
        "ref": "string",
        "weight": "number",
        "shipped_on": "date",
        "fragile": "boolean",
        "note": "string",
    }
    spec = _spec(preview)
    dry = await importing.import_file(admin, "shipments", path, "shipments.csv", dry_run=True, create=spec)
    assert (dry["added"], dry["changed"], dry["unchanged"], dry["refused"], dry["applied"]) == (
        3,
        0,
        0,
        0,
        False,
    )
    with pytest.raises(NotFound):  # the dry run defined nothing and wrote nothing
        await defined.get_defined(admin.company_id, "shipments")

    done = await importing.import_file(admin, "shipments", path, "shipments.csv", dry_run=False, create=spec)
    assert (done["added"], done["refused"], done["applied"]) == (3, 0, True)
    rows = await _rows("shipments", admin.company_id)
    assert rows["S-1"]["weight"] == "12.5" and rows["S-1"]["fragile"] is True

    # the second file: S-1 changed, S-2 unchanged, S-3 refused (bad number on row 4), S-4 added
    path.write_text(
        "Ref,Weight,Shipped On,Fragile,Note\n"
        "S-1,41.0625,2026-01-02,true,first\n"
        "S-2,3,2026-01-03,false,second\n"
        "S-3,heavy,2026-01-04,true,third\n"
        "S-4,1,2026-02-01,false,fourth\n"
    )
    again = await importing.import_file(admin, "shipments", path, "shipments.csv", dry_run=True)
    assert (again["added"], again["changed"], again["unchanged"], again["refused"]) == (1, 1, 1, 1)
    assert again["refusals"][0]["row"] == 4 and "weight" in again["refusals"][0]["reason"]
    assert await _rows("shipments", admin.company_id) == rows  # a dry run writes nothing
    applied = await importing.import_file(admin, "shipments", path, "shipments.csv", dry_run=False)
    assert (applied["added"], applied["changed"], applied["unchanged"], applied["refused"]) == (1, 1, 1, 1)
    after = await _rows("shipments", admin.company_id)
    assert after["S-1"]["weight"] == "41.0625" and after["S-1"]["_version"] == 2
    assert after["S-2"]["_version"] == 1 and after["S-3"]["weight"] == "7.25" and "S-4" in after

    # audited: the file's hash and the counts, no record value
    entries = (
        await AuditEntry.select().where(AuditEntry.action == "dataset.imported").order_by(AuditEntry.seq)
    )
    assert len(entries) == 2
    data = entries[-1]["data"]
    data = json.loads(data) if isinstance(data, str) else data
    assert data["file_sha256"] == applied["sha256"] and len(applied["sha256"]) == 64
    assert (data["added"], data["changed"], data["refused"]) == (1, 1, 1)
    assert not any(v in json.dumps(entries[-1], default=str) for v in ("S-4", "fourth", "heavy", "41.0625"))


@pytest.mark.sqlite
async def test_ten_thousand_refused_rows_are_counted_and_the_list_is_capped(demo_db: str) -> None:
    admin = await load_user_context_by_email("admin@acme.example")
    spec = defined.DatasetSpec(
        name="claims",
        label="Claims",
        columns=[
            defined.ColumnSpec("claim", ColumnKind.string, max_length=50),
            defined.ColumnSpec("amount", ColumnKind.number),
        ],
        key_column="claim",
    )
    ds = await defined.define_dataset(admin, spec)
    bad = ((i + 2, [f"C-{i}", "not a number"]) for i in range(10_000))
    good = ((10_002 + i, [f"G-{i}", "1.5"]) for i in range(3))
    defaults = defined.RowDefaults(owner_id=admin.user_id)
    report = await importing.load_rows(ds, ["claim", "amount"], [*bad, *good], apply=False, defaults=defaults)
    answer = report.as_dict()
    assert answer["refused"] == 10_000 and answer["added"] == 3
    assert len(answer["refusals"]) == importing.REFUSALS_LISTED
    assert answer["refusals_not_listed"] == 10_000 - importing.REFUSALS_LISTED
    assert answer["refusals"][0]["row"] == 2 and "amount" in answer["refusals"][0]["reason"]
    assert len(json.dumps(answer)) < 20_000  # the answer stays small


@pytest.mark.sqlite
async def test_an_import_that_fails_part_way_leaves_nothing(
    demo_db: str, tmp_path: Path, monkeypatch
) -> None:
    """Hostile: the file breaks after several batches were written. Control: the same rows, unbroken, land."""
    admin = await load_user_context_by_email("admin@acme.example")
    spec = defined.DatasetSpec(
        name="parts",
        label="Parts",
        columns=[defined.ColumnSpec("sku", ColumnKind.string), defined.ColumnSpec("n", ColumnKind.integer)],
        key_column="sku",
    )
    ds = await defined.define_dataset(admin, spec)
    monkeypatch.setattr(importing, "BATCH", 50)
    rows_written = 175

    def broken(stop: bool):
        def stream(path, filename, limits=None):
            def rows():
                for i in range(rows_written):
                    yield i + 2, [f"P-{i}", str(i)]
                if stop:
                    raise ImportFileRefused("The converter stopped unexpectedly (exit -9).")

            return importing.RowStream(header=["sku", "n"], kind="csv", rows=rows())

        return stream

    path = tmp_path / "parts.csv"
    path.write_text("sku,n\n")
    monkeypatch.setattr(importing, "stream_rows", broken(True))
    with pytest.raises(Invalid, match="stopped unexpectedly"):
        await importing.import_file(admin, "parts", path, "parts.csv", dry_run=False)
    assert await DatasetRow.count().where(DatasetRow.dataset == ds.id) == 0
    assert not await AuditEntry.exists().where(AuditEntry.action == "dataset.imported")

    monkeypatch.setattr(importing, "stream_rows", broken(False))
    done = await importing.import_file(admin, "parts", path, "parts.csv", dry_run=False)
    assert done["added"] == rows_written
    assert await DatasetRow.count().where(DatasetRow.dataset == ds.id) == rows_written


@pytest.mark.sqlite
async def test_who_may_import(demo_db: str, tmp_path: Path) -> None:
    """Hostile: the assistant's token (even an admin's), a member without edit on the dataset, and another
    company's admin. Controls: the admin's session, and a member once granted edit on it."""
    admin = await load_user_context_by_email("admin@acme.example")
    spec = defined.DatasetSpec(
        name="surveys",
        label="Surveys",
        columns=[
            defined.ColumnSpec("answer_id", ColumnKind.string),
            defined.ColumnSpec("score", ColumnKind.integer),
        ],
        key_column="answer_id",
    )
    await defined.define_dataset(admin, spec)
    path = tmp_path / "surveys.csv"
    path.write_text("answer_id,score\nA1,5\n")

    token = dataclasses.replace(admin, auth=TOKEN, token_id=1, token_scope="assistant")
    with pytest.raises(Forbidden) as refused:
        await importing.import_file(token, "surveys", path, "surveys.csv", dry_run=True)
    assert refused.value.code == "person_required"
    with pytest.raises(Forbidden):
        await importing.preview_file(token, path, "surveys.csv")

    member = await load_user_context_by_email("bob@acme.example")
    assert not member.is_admin
    with pytest.raises(Forbidden) as no_edit:
        await importing.import_file(member, "surveys", path, "surveys.csv", dry_run=True)
    assert no_edit.value.code == "dataset_forbidden"
    with pytest.raises(Forbidden):  # nor define one from a file
        await importing.import_file(
            member, "other", path, "s.csv", dry_run=True, create=dataclasses.replace(spec, name="other")
        )

    other = await load_user_context_by_email("admin@globex.example")
    with pytest.raises(AppError) as unknown:
        await importing.import_file(other, "surveys", path, "surveys.csv", dry_run=False)
    assert unknown.value.code == "unknown_dataset"

    granted = dataclasses.replace(member, permissions={**member.permissions, "surveys": "edit"})
    assert (await importing.import_file(granted, "surveys", path, "surveys.csv", dry_run=False))["added"] == 1
    again = await importing.import_file(granted, "surveys", path, "surveys.csv", dry_run=True)
    assert (again["unchanged"], again["added"], again["changed"]) == (1, 0, 0)


def test_xlsx_and_ods_stream_through_the_confined_child(tmp_path: Path) -> None:
    """The import's reader runs the staging parsers in the sandbox, row by row: dates, numbers and booleans
    come out as the sheet shows them, with the sheet's own row numbers (a blank row keeps its number)."""
    import datetime as dt

    import openpyxl
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["ref", "when", "qty", "ok"])
    sheet.append(["R1", dt.date(2026, 3, 1), 2.5, True])
    sheet.append([])
    sheet.append(["R2", dt.date(2026, 3, 2), 4, False])
    book.save(tmp_path / "a.xlsx")
    stream = stream_rows(tmp_path / "a.xlsx", "a.xlsx")
    assert (stream.kind, stream.header) == ("xlsx", ["ref", "when", "qty", "ok"])
    assert list(stream.rows) == [
        (2, ["R1", "2026-03-01", "2.5", "TRUE"]),
        (4, ["R2", "2026-03-02", "4", "FALSE"]),
    ]

    doc = OpenDocumentSpreadsheet()
    table = Table(name="Sheet1")
    for values in (["ref", "qty"], ["R1", "3"], ["R2", "5"]):
        row = TableRow()
        for v in values:
            cell = TableCell(valuetype="string")
            cell.addElement(P(text=v))
            row.addElement(cell)
        table.addElement(row)
    doc.spreadsheet.addElement(table)
    doc.save(str(tmp_path / "b.ods"))
    stream = stream_rows(tmp_path / "b.ods", "b.ods")
    assert (stream.kind, stream.header, list(stream.rows)) == (
        "ods",
        ["ref", "qty"],
        [(2, ["R1", "3"]), (3, ["R2", "5"])],
    )

    (tmp_path / "c.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    with pytest.raises(ImportFileRefused, match="CSV, Excel"):
        stream_rows(tmp_path / "c.pdf", "c.pdf")


async def test_a_re_import_keeps_each_rows_owner_unless_the_file_maps_owner_email(
    demo_db: str, tmp_path: Path, monkeypatch
) -> None:
    """Hostile: bob (edit on the dataset) re-imports a file of alice's keys without an `owner_email` column;
    alice's rows must stay hers, with their team and visibility (before, every row moved to bob), and her
    private row, which bob may not see, is refused whole: not overwritten, and not compared, so "changed" or
    "unchanged" does not tell him whether his guess of its value is right (before, it was both). Controls: bob's
    new key is his (the import's default), his changed value of a row he sees lands, and the admin's file with a
    mapped `owner_email` column does reassign (an empty cell keeps the owner). Both engines: on PostgreSQL the
    rows go through COPY into the transaction's temporary table, made again for each import on the pool's
    connections."""
    admin = await load_user_context_by_email("admin@acme.example")
    alice = await load_user_context_by_email("alice@acme.example")
    bob = await load_user_context_by_email("bob@acme.example")
    spec = defined.DatasetSpec(
        name="claims",
        label="Claims",
        columns=[
            defined.ColumnSpec("claim", ColumnKind.string),
            defined.ColumnSpec("amount", ColumnKind.number),
        ],
        key_column="claim",
    )
    ds = await defined.define_dataset(admin, spec)
    alice, bob = (
        dataclasses.replace(p, permissions={**p.permissions, "claims": "edit"}) for p in (alice, bob)
    )
    path = tmp_path / "claims.csv"
    path.write_text("claim\n")  # hashed for the audit entry; the rows come from the stream below

    def rows_of(header: list[str], rows: list[list[str]]):
        def stream(path, filename, limits=None):
            return importing.RowStream(
                header=header, kind="csv", rows=(row for row in enumerate(rows, start=2))
            )

        return stream

    async def owners() -> dict[str, tuple]:
        found = await DatasetRow.select(
            DatasetRow.external_key,
            DatasetRow.owner,
            DatasetRow.team,
            DatasetRow.visibility,
            DatasetRow.version,
        ).where(DatasetRow.dataset == ds.id)
        return {r["external_key"]: (r["owner"], r["team"], r["visibility"], r["version"]) for r in found}

    shared = defined.RowDefaults(owner_id=alice.user_id, visibility="company")
    monkeypatch.setattr(
        importing, "stream_rows", rows_of(["claim", "amount"], [["C-1", "10"], ["C-2", "20"]])
    )
    await importing.import_file(alice, "claims", path, "claims.csv", dry_run=False, defaults=shared)
    private = defined.RowDefaults(owner_id=alice.user_id, visibility="private")
    monkeypatch.setattr(importing, "stream_rows", rows_of(["claim", "amount"], [["C-9", "90"]]))
    await importing.import_file(alice, "claims", path, "claims.csv", dry_run=False, defaults=private)
    assert await owners() == {
        "C-1": (alice.user_id, None, "company", 1),
        "C-2": (alice.user_id, None, "company", 1),
        "C-9": (alice.user_id, None, "private", 1),  # bob may not see it
    }

    async def c9_values() -> object:
        return (await DatasetRow.select(DatasetRow.values).where(DatasetRow.external_key == "C-9").first())[
            "values"
        ]

    c9_before = await c9_values()

    # hostile: bob's file has alice's keys (one with a new amount, her private one with a guess of its value)
    # and one of his own, no owner_email column
    for guess in ("90", "91"):  # the right value and a wrong one: the same answer
        bobs = [["C-1", "11"], ["C-2", "20"], ["C-3", "30"], ["C-9", guess]]
        monkeypatch.setattr(importing, "stream_rows", rows_of(["claim", "amount"], bobs))
        dry = await importing.import_file(bob, "claims", path, "claims.csv", dry_run=True)
        assert (dry["added"], dry["changed"], dry["unchanged"], dry["refused"]) == (1, 1, 1, 1), (guess, dry)
        assert [(r["row"], r["reason"]) for r in dry["refusals"]] == [(5, defined.HIDDEN_ROW)]
    done = await importing.import_file(bob, "claims", path, "claims.csv", dry_run=False)
    assert (done["added"], done["changed"], done["unchanged"], done["refused"]) == (1, 1, 1, 1)
    assert await owners() == {
        "C-1": (alice.user_id, None, "company", 2),  # its amount changed, its owner did not
        "C-2": (alice.user_id, None, "company", 1),
        "C-3": (bob.user_id, None, "company", 1),  # new: the import's default owner, bob
        "C-9": (alice.user_id, None, "private", 1),  # not written: bob may not see it
    }
    assert await c9_values() == c9_before  # its value too

    # control: the admin's file maps owner_email; C-1 moves to bob, C-2's empty cell keeps alice
    monkeypatch.setattr(
        importing,
        "stream_rows",
        rows_of(["claim", "amount", "owner_email"], [["C-1", "11", "bob@acme.example"], ["C-2", "20", ""]]),
    )
    moved = await importing.import_file(admin, "claims", path, "claims.csv", dry_run=False)
    assert (moved["changed"], moved["unchanged"]) == (1, 1)
    after = await owners()
    assert after["C-1"] == (bob.user_id, None, "company", 3) and after["C-2"] == (
        alice.user_id,
        None,
        "company",
        1,
    )


def test_rows_come_in_batches_and_a_row_over_4_mib_is_still_refused(tmp_path: Path) -> None:
    """The child writes many rows a line (up to 64 KiB) now: a 1 MiB row among small ones still comes through
    whole, in order with its neighbours (control), and the row over 4 MiB after them is refused as before
    (hostile: a file that makes the parent hold a huge line). One file, one child: the rows before the huge
    one arrive, then the refusal. Cells of 30,000 characters: the readers cut a cell at 32,767."""
    small = [f"K-{i},{'n' * 200}" for i in range(600)]  # ~120 kB: a few lines of rows
    cell = "x" * 30_000
    big, huge = ",".join(["BIG", *[cell] * 35]), ",".join(["HUGE", *[cell] * 145])
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(["key,note", *small[:300], big, *small[300:], huge]) + "\n")
    rows = []
    with pytest.raises(ImportFileRefused, match="larger than 4 MiB"):
        for row in stream_rows(path, "rows.csv").rows:
            rows.append(row)
    assert [n for n, _ in rows] == list(range(2, 603))
    assert rows[300][1] == ["BIG", *[cell] * 35] and rows[-1][1] == ["K-599", "n" * 200]
