"""The bundle as an approval binds to it: bundle_sha256 follows every input byte, verify_bundle catches
tampering, unreadable Drive files are reported one by one while the rest stages, and planted instructions
are found where they sit."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest

from backend.demo.files import (
    FEEDBACK_NAME,
    PIPELINE_NAME,
    PLANTED_INSTRUCTION,
    PRICE_LIST_NAME,
    demo_drive_files,
)
from backend.drive import blobs
from backend.drive import service as drive
from backend.drive.tables import DriveFile
from backend.hashing import sha256_bytes
from backend.records import tables as rt
from backend.records.export import visible_rows
from backend.staging import export as staged_export
from backend.staging.bundle import verify_bundle
from backend.staging.service import VERSIONS, stage, staged_versions
from backend.tenancy.context import load_user_context_by_email

CSV_BYTES = b"region,amount\nEast,1200\nWest,900\n"


async def _ctx(email: str = "alice@acme.example"):
    return await load_user_context_by_email(email)


async def _upload(ctx, name: str, data: bytes) -> int:
    return (await drive.upload(ctx, name, data))["id"]


async def _visible_deal(email: str, *, visible: bool) -> int:
    """A deal of Acme that `email` can (or cannot) see."""
    from backend.records.service import list_records

    ctx = await _ctx(email)
    seen = {r["id"] for r in (await list_records(ctx, "deals", page_size=500)).items}
    rows = await rt.Deal.select(rt.Deal.id).where(rt.Deal.company == ctx.company_id).order_by(rt.Deal.id)
    return next(r["id"] for r in rows if (r["id"] in seen) == visible)


# --- bundle_sha256 ------------------------------------------------------------------------------------


async def test_hash_is_stable_for_identical_inputs_and_follows_every_input(
    demo_db: str, tmp_path: Path
) -> None:
    alice = await _ctx()
    file_id = await _upload(alice, "regions.csv", CSV_BYTES)

    async def bundle_hash(tag: str) -> str:
        return (await stage(alice, ["deals"], [file_id], tmp_path / tag)).bundle_sha256

    first = await bundle_hash("a")
    await asyncio.sleep(1.1)  # created_at has 1 s resolution
    assert await bundle_hash("b") == first  # same inputs, later time: same hash
    times = [json.loads((tmp_path / t / "manifest.json").read_text())["created_at"] for t in "ab"]
    assert times[0] != times[1]

    # a field of a record alice sees
    deal = await _visible_deal("alice@acme.example", visible=True)
    old = (await rt.Deal.select(rt.Deal.notes).where(rt.Deal.id == deal).first())["notes"]
    await rt.Deal.update({rt.Deal.notes: old + "."}).where(rt.Deal.id == deal)
    changed_record = await bundle_hash("c")
    assert changed_record != first
    await rt.Deal.update({rt.Deal.notes: old}).where(rt.Deal.id == deal)
    assert await bundle_hash("d") == first  # back to the same bytes, back to the same hash

    # a record alice cannot see is not an input of hers
    hidden = await _visible_deal("alice@acme.example", visible=False)
    await rt.Deal.update({rt.Deal.notes: "changed behind her back"}).where(rt.Deal.id == hidden)
    assert await bundle_hash("e") == first

    # one byte of the Drive file
    changed = CSV_BYTES.replace(b"1200", b"1201")
    await DriveFile.update({DriveFile.sha256: blobs.put(changed), DriveFile.size: len(changed)}).where(
        DriveFile.id == file_id
    )
    changed_file = await bundle_hash("f")
    assert changed_file not in (first, changed_record)
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text())
    assert {f["source"].get("sha256") for f in manifest["files"] if f["source"]["type"] == "drive_file"} == {
        blobs.put(changed)
    }


# the visibility rule's (on both engines: tests/records/test_records_visibility); the hash on both: the
# first test
@pytest.mark.sqlite
async def test_hash_differs_between_users_who_see_different_rows(demo_db: str, tmp_path: Path) -> None:
    a = await stage(await _ctx("alice@acme.example"), ["deals"], [], tmp_path / "a")
    b = await stage(await _ctx("bob@acme.example"), ["deals"], [], tmp_path / "b")
    assert a.bundle_sha256 != b.bundle_sha256


# --- verify_bundle --------------------------------------------------------------------------------------


async def _fresh_bundle(tmp_path: Path, tag: str) -> tuple[Path, str]:
    alice = await _ctx()
    file_id = await _upload(alice, f"{tag}.csv", CSV_BYTES)
    bundle = await stage(alice, ["deals", "tasks"], [file_id], tmp_path / tag)
    assert verify_bundle(bundle.directory, bundle.bundle_sha256) is None  # positive control: intact
    return bundle.directory, bundle.bundle_sha256


async def test_record_versions_are_staged_with_the_bundle_and_covered_by_its_hash(
    demo_db: str, tmp_path: Path
) -> None:
    """Accepting a proposed change compares the record's version with the staged one: it is recorded at
    staging time, listed in the manifest and hashed with the rest, and read back without parsing the CSVs."""
    root, digest = await _fresh_bundle(tmp_path, "versions")
    manifest = json.loads((root / "manifest.json").read_text())
    assert VERSIONS in {f["path"] for f in manifest["files"]}
    for dataset in ("deals", "tasks"):
        with (root / "datasets" / f"{dataset}.csv").open(newline="") as fh:
            expected = {int(r["id"]): int(r["version"]) for r in csv.DictReader(fh)}
        assert expected and staged_versions(root, dataset) == expected
    assert staged_versions(root, "employees") == {}  # not staged
    first, staged = next(iter(staged_versions(root, "deals").items()))
    await rt.Deal.update({rt.Deal.version: rt.Deal.version + 1}).where(rt.Deal.id == first)
    assert staged_versions(root, "deals")[first] == staged  # what was staged, not what the record is now
    sidecar = json.loads((root / VERSIONS).read_text())
    sidecar["datasets"]["deals"][0][1] = 99
    (root / VERSIONS).write_text(json.dumps(sidecar))
    assert "differs from the approved" in (verify_bundle(root, digest) or "")


@pytest.mark.sqlite  # the versions read back from the bundle's own CSV file, not an engine's
async def test_a_bundle_staged_before_record_versions_reads_them_from_its_export(
    demo_db: str, tmp_path: Path
) -> None:
    root, _ = await _fresh_bundle(tmp_path, "legacy")
    expected = staged_versions(root, "deals")
    (root / VERSIONS).unlink()
    assert staged_versions(root, "deals") == expected


# verify_bundle reads the bundle's files: its claims are on SQLite; staging itself runs on both engines above
@pytest.mark.sqlite
async def test_verify_bundle_detects_an_altered_file(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "altered")
    path = root / "datasets" / "deals.csv"
    data = bytearray(path.read_bytes())
    data[-2] = ord("x") if data[-2] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    problem = verify_bundle(root, digest)
    assert problem and "differs" in problem


@pytest.mark.sqlite
async def test_verify_bundle_detects_an_added_file(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "added")
    (root / "datasets" / "extra.csv").write_text("id\n1\n")
    problem = verify_bundle(root, digest)
    assert problem and "datasets/extra.csv" in problem


@pytest.mark.sqlite
async def test_verify_bundle_detects_a_removed_file(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "removed")
    (root / "datasets" / "tasks.csv").unlink()
    problem = verify_bundle(root, digest)
    assert problem and "datasets/tasks.csv" in problem


@pytest.mark.sqlite
async def test_verify_bundle_detects_a_removal_hidden_in_the_manifest(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "hidden")
    (root / "datasets" / "tasks.csv").unlink()
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["path"] != "datasets/tasks.csv"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    problem = verify_bundle(root, digest)
    assert problem and "differs from the approved" in problem


@pytest.mark.sqlite
async def test_verify_bundle_refuses_an_unreadable_manifest(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "garbled")
    (root / "manifest.json").write_text('{"files": [')
    assert verify_bundle(root, digest) == "the bundle's manifest.json is unreadable"
    (root / "manifest.json").write_text('{"files": [{"name": "x"}]}')
    assert verify_bundle(root, digest) == "the bundle's manifest.json is unreadable"


@pytest.mark.sqlite
async def test_verify_bundle_refuses_a_bundle_without_manifest(demo_db: str, tmp_path: Path) -> None:
    root, digest = await _fresh_bundle(tmp_path, "nomanifest")
    (root / "manifest.json").unlink()
    assert verify_bundle(root, digest) == "the bundle has no manifest.json"


# --- unreadable Drive files ---------------------------------------------------------------------------


def _encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(dict(demo_drive_files())[PRICE_LIST_NAME])))
    writer.encrypt(user_password="s3cret", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _corrupt_xlsx() -> bytes:
    wb = openpyxl.Workbook()
    wb.active.append(["a", "b"])
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()[: len(out.getvalue()) // 2]


def _docx() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<document/>")
    return out.getvalue()


@pytest.mark.sqlite  # the converter's verdicts on Drive files, not an engine's
async def test_unreadable_files_are_reported_and_the_rest_stages(demo_db: str, tmp_path: Path) -> None:
    alice = await _ctx()
    bad = {
        "Prices (locked).pdf": (_encrypted_pdf(), "password"),
        "Plan.xlsx": (_corrupt_xlsx(), "damaged"),
        "Letter.docx": (_docx(), "damaged"),  # converts since issue 54; one with no body is damaged
        "tool.bin": (bytes(range(256)) * 8, "not a format"),
    }
    bad_ids = {name: await _upload(alice, name, data) for name, (data, _) in bad.items()}
    good_id = await _upload(alice, "regions.csv", CSV_BYTES)
    bundle = await stage(
        alice, ["deals"], [bad_ids["Prices (locked).pdf"], good_id, *bad_ids.values()], tmp_path / "b"
    )

    errors = {e["name"]: e for e in bundle.manifest["errors"]}
    assert sorted(errors) == sorted(bad)
    for name, (_, word) in bad.items():
        assert errors[name]["drive_file_id"] == bad_ids[name]
        assert word in errors[name]["error"].lower(), errors[name]
        assert errors[name]["error"].endswith(".")
    staged_sources = {f["source"].get("name") for f in bundle.manifest["files"]}
    assert "regions.csv" in staged_sources and not staged_sources & set(bad)  # the good file is there
    assert any(f["path"] == "datasets/deals.csv" for f in bundle.manifest["files"])
    readme = (tmp_path / "b" / "README.txt").read_text()
    assert all(f"NOT STAGED: Drive file '{name}'" in readme for name in bad)
    assert "regions" in readme
    assert verify_bundle(bundle.directory, bundle.bundle_sha256) is None


@pytest.mark.sqlite  # Drive's visibility rule, the app's (on PostgreSQL: tests/drive/test_output_visibility)
async def test_a_file_the_user_cannot_see_is_refused_not_skipped(demo_db: str, tmp_path: Path) -> None:
    from backend.errors import NotFound

    file_id = await _upload(await _ctx("alice@acme.example"), "mine.csv", CSV_BYTES)
    bob = await _ctx("bob@acme.example")
    try:
        await stage(bob, ["deals"], [file_id], tmp_path / "b")
    except NotFound as exc:
        assert str(file_id) in str(exc.detail)
    else:
        raise AssertionError("bob staged alice's private file")
    assert not (tmp_path / "b").exists()
    maria = await _ctx("maria@acme.example")  # positive control: her manager may
    assert (await stage(maria, [], [file_id], tmp_path / "m")).manifest["errors"] == []


# --- planted instructions ----------------------------------------------------------------------------


@pytest.mark.sqlite  # the scanner on a Drive file (a record's finding runs on both engines below)
async def test_planted_instruction_in_the_demo_workbook_is_flagged(demo_db: str, tmp_path: Path) -> None:
    alice = await _ctx()
    feedback = (await drive.find_file_by_name(alice, FEEDBACK_NAME))["id"]
    pipeline = (await drive.find_file_by_name(alice, PIPELINE_NAME))["id"]

    clean = await stage(alice, [], [pipeline], tmp_path / "clean")
    assert clean.findings == [] and clean.manifest["findings_count"] == 0  # positive control

    bundle = await stage(alice, [], [feedback], tmp_path / "b")
    hits = [f for f in bundle.findings if f.column == "Notes"]
    assert len(hits) == 1, bundle.findings
    hit = hits[0]
    assert (hit.path, hit.sheet, hit.row, hit.column) == (FEEDBACK_NAME, "Responses", 10, "Notes")
    assert hit.severity == "high"
    assert "ignore your previous instructions" in hit.excerpt.lower()
    assert bundle.manifest["findings_count"] >= 1
    # the row number points at the right row of the staged sheet
    sheet = next(f for f in bundle.manifest["files"] if f.get("sheet") == "Responses")
    with (tmp_path / "b" / sheet["path"]).open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, data = rows[0], rows[1:]
    assert data[hit.row - 1][header.index("Notes")] == PLANTED_INSTRUCTION


async def test_instruction_in_a_record_is_flagged_at_each_row(demo_db: str, tmp_path: Path) -> None:
    bob = await _ctx("bob@acme.example")
    clean = await stage(bob, ["tasks"], [], tmp_path / "clean")
    assert clean.findings == []  # positive control: the demo tasks hold none
    ids = csv_column(tmp_path / "clean" / "datasets" / "tasks.csv", "id")
    targets = [int(ids[3]), int(ids[40])]
    await rt.Task.update({rt.Task.description: PLANTED_INSTRUCTION}).where(rt.Task.id.is_in(targets))
    bundle = await stage(bob, ["tasks"], [], tmp_path / "b")
    assert [(f.path, f.row, f.column) for f in bundle.findings] == [
        ("datasets/tasks.csv", 4, "description"),
        ("datasets/tasks.csv", 41, "description"),
    ]
    assert all(f.severity == "high" for f in bundle.findings)
    assert bundle.manifest["findings_count"] == len(bundle.findings) == 2


# the scan cache's decision, the app's (the verdict store on both engines: tests/runs/test_finding_warnings)
@pytest.mark.sqlite
async def test_an_export_staged_again_unchanged_is_not_scanned_again(
    demo_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Assistants stage the same dataset run after run: the same bytes are scanned once and every bundle
    still lists the findings. The attack: a row changed after that first scan, planted afresh, changes the
    bytes and is scanned and found (the control, staged unchanged, is not scanned again)."""
    scans: list[str] = []
    scan = staged_export._scan
    monkeypatch.setattr(staged_export, "_scan", lambda export, path: scans.append(path) or scan(export, path))
    staged_export._scans.clear()  # another test may have staged the same demo rows
    bob = await _ctx("bob@acme.example")
    first = await stage(bob, ["tasks"], [], tmp_path / "first")
    ids = csv_column(tmp_path / "first" / "datasets" / "tasks.csv", "id")
    await rt.Task.update({rt.Task.description: PLANTED_INSTRUCTION}).where(rt.Task.id == int(ids[3]))
    planted = await stage(bob, ["tasks"], [], tmp_path / "planted")
    again = await stage(bob, ["tasks"], [], tmp_path / "again")

    assert first.findings == []
    assert scans == ["datasets/tasks.csv"] * 2  # the control: staged unchanged, not scanned a third time
    assert [(f.row, f.column) for f in planted.findings] == [(4, "description")]
    assert [f.model_dump() for f in again.findings] == [f.model_dump() for f in planted.findings]
    assert again.manifest["findings_count"] == 1
    again.findings[0].excerpt = "changed by its caller"  # each bundle has its own copies
    third = await stage(bob, ["tasks"], [], tmp_path / "third")
    assert third.findings[0].excerpt == planted.findings[0].excerpt

    await rt.Task.update({rt.Task.description: PLANTED_INSTRUCTION}).where(rt.Task.id == int(ids[40]))
    replanted = await stage(bob, ["tasks"], [], tmp_path / "replanted")  # the attack: new bytes
    assert len(scans) == 3
    assert [(f.row, f.column) for f in replanted.findings] == [(4, "description"), (41, "description")]

    # kept per company: the same bytes staged for another company are scanned again, so how long a proposal
    # takes tells no company what another staged; the control, the same company again, is not
    export = (await visible_rows(bob, "tasks", 5000)).export()
    digest = sha256_bytes(export.csv)
    for company in (bob.company_id, bob.company_id + 1000, bob.company_id):
        staged_export.scan_export(export, path="datasets/tasks.csv", sha256=digest, company_id=company)
    assert len(scans) == 4


def csv_column(path: Path, column: str) -> list[str]:
    with path.open(newline="") as fh:
        return [row[column] for row in csv.DictReader(fh)]


@pytest.mark.sqlite  # the converter's warnings, not an engine's
async def test_what_the_converter_warns_about_reaches_the_manifest(demo_db: str, tmp_path: Path) -> None:
    """A converter's warning (here: a CSV named .pdf) is listed in the manifest the person reads before
    approving; a clean file adds none (the control)."""
    alice = await _ctx()
    misnamed = await _upload(alice, "totals.pdf", CSV_BYTES)
    clean = await _upload(alice, "regions.csv", CSV_BYTES)
    bundle = await stage(alice, [], [misnamed, clean], tmp_path / "b")

    warned = {w["name"]: w for w in bundle.manifest["warnings"]}
    assert "named .pdf" in warned["totals.pdf"]["warning"]
    assert warned["totals.pdf"]["drive_file_id"] == misnamed
    assert "regions.csv" not in warned


@pytest.mark.sqlite  # tier 3's verdict on staged rows, not an engine's
async def test_an_instruction_only_tier_3_reads_reaches_the_approval_data_with_its_tier(
    demo_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 55: a record holding an instruction in a language no lexicon covers, in a long note, is found when
    the proposal is staged, and the finding the approval screen shows says tier 3 found it (with its span and
    reason codes); the manifest says what tier 3 read. Control: the demo tasks staged before hold none."""
    from backend.injection import encoder
    from tests.support.injection import KOREAN, LONG_NOTE

    # the cell budget only: on a loaded host the time budget could leave the cell to tier 1 (the bench's figure)
    monkeypatch.setattr(encoder, "MAX_SECONDS", float("inf"))
    staged_export._scans.clear()
    bob = await _ctx("bob@acme.example")
    clean = await stage(bob, ["tasks"], [], tmp_path / "clean")
    assert clean.findings == []
    ids = csv_column(tmp_path / "clean" / "datasets" / "tasks.csv", "id")
    await rt.Task.update({rt.Task.description: LONG_NOTE}).where(rt.Task.id == int(ids[7]))
    bundle = await stage(bob, ["tasks"], [], tmp_path / "b")
    (finding,) = bundle.findings
    assert (finding.row, finding.column, finding.tier) == (8, "description", 3)
    assert finding.reason_codes[0] == "semantic" and KOREAN in LONG_NOTE[slice(*finding.span)]
    assert bundle.manifest["scan"]["tier3_judged"] >= 1
