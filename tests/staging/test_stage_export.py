"""Staged exports equal the records API, user by user and dataset by dataset; refusals are loud; truncation
is said in the manifest, the README and by the real `cleanroom stage` CLI."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.errors import Forbidden
from backend.records import service as records
from backend.records.datasets import DATASETS
from backend.records.export import visible_rows
from backend.staging.service import stage
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import User

CAP = 5000
CLEANROOM = str(Path(sys.executable).parent / "cleanroom")


async def api_ids(ctx, dataset: str) -> tuple[list[int], int]:
    """Ids the records API lists for this user (id order), paging through everything up to the cap."""
    ids: list[int] = []
    page = 1
    while True:
        result = await records.list_records(ctx, dataset, page=page, page_size=records.MAX_PAGE_SIZE)
        ids += [row["id"] for row in result.items]
        if len(ids) >= min(result.total, CAP) or not result.items:
            return ids[:CAP], result.total
        page += 1


def csv_ids(path: Path) -> list[int]:
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        assert header[0] == "id"
        return [int(row[0]) for row in reader]


async def all_demo_users() -> list[str]:
    return sorted(r["email"] for r in await User.select(User.email))


async def check_user(email: str, datasets: list[str], out: Path) -> dict[str, int]:
    """Stage every permitted dataset of `datasets` for `email`; every refused one must raise, by name."""
    ctx = await load_user_context_by_email(email)
    permitted = [d for d in datasets if ctx.can(d)]
    refused = [d for d in datasets if not ctx.can(d)]
    sizes: dict[str, int] = {}
    if permitted:
        bundle = await stage(ctx, permitted, [], out / email)
        by_dataset = {
            f["source"]["dataset"]: f for f in bundle.manifest["files"] if f["source"]["type"] == "dataset"
        }
        assert sorted(by_dataset) == sorted(permitted)
        for name in permitted:
            expected, total = await api_ids(ctx, name)
            entry = by_dataset[name]
            staged = csv_ids(out / email / entry["path"])
            assert staged == expected, f"{email} {name}: staged ids differ from the records API"
            assert entry["rows"] == len(expected) and entry["visible_total"] == total, (email, name)
            assert entry["truncated"] == (total > CAP), (email, name)
            sizes[name] = total
    for name in refused:
        target = out / f"{email}-{name}"
        with pytest.raises(Forbidden) as err:
            await stage(ctx, [name], [], target)
        assert err.value.status_code == 403 and err.value.code == "dataset_forbidden"
        assert [r["dataset"] for r in err.value.detail["refused"]] == [name]
        assert email in err.value.detail["refused"][0]["reason"]
        assert name in err.value.detail["message"]
        assert not target.exists() or not any(target.iterdir())
    if refused and permitted:  # asking for a mix refuses the whole request, naming only the refused
        with pytest.raises(Forbidden) as err:
            await stage(ctx, datasets, [], out / f"{email}-mixed")
        assert sorted(r["dataset"] for r in err.value.detail["refused"]) == sorted(refused)
    return sizes


@pytest.mark.sqlite
async def test_every_user_and_dataset_equals_the_records_api(demo_db: str, tmp_path: Path) -> None:
    emails = await all_demo_users()
    assert len(emails) >= 9 and any(e.endswith("@globex.example") for e in emails)
    seen: dict[str, dict[str, int]] = {}
    refused_somewhere: set[str] = set()
    for email in emails:
        seen[email] = await check_user(email, list(DATASETS), tmp_path)
        refused_somewhere |= set(DATASETS) - set(seen[email])
    # the comparison could fail: users see different amounts of the same dataset, and refusals happen
    assert seen["bob@acme.example"]["deals"] < seen["maria@acme.example"]["deals"]
    assert seen["maria@acme.example"]["deals"] < seen["admin@acme.example"]["deals"]
    assert seen["admin@globex.example"]["deals"] < seen["admin@acme.example"]["deals"]
    assert "employees" not in seen["bob@acme.example"] and "employees" in seen["hannah@acme.example"]
    assert {"employees", "contacts", "invoices"} <= refused_somewhere
    assert all(any(name in s for s in seen.values()) for name in DATASETS)  # every dataset exercised


async def test_subset_equals_the_records_api(demo_db: str, tmp_path: Path) -> None:
    """The same check on both engines, for a few users and datasets."""
    for email in ("bob@acme.example", "maria@acme.example", "hannah@acme.example", "gina@globex.example"):
        await check_user(email, ["deals", "tasks", "employees", "invoices"], tmp_path)


def _field(value: object) -> object:
    if value is None:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else value


def api_csv(columns: list[str], rows: list[dict]) -> bytes:
    """What csv.writer makes of the records API's rows: the reference the staged CSV must equal."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_field(row[c]) for c in columns] for row in rows)
    return out.getvalue().encode()


async def api_rows(ctx, dataset: str) -> tuple[list[dict], int]:
    rows: list[dict] = []
    page = 1
    while True:
        result = await records.list_records(ctx, dataset, page=page, page_size=records.MAX_PAGE_SIZE)
        rows += result.items
        if len(rows) >= min(result.total, CAP) or not result.items:
            return rows[:CAP], result.total
        page += 1


async def test_staged_csv_is_byte_identical_to_the_records_api(demo_db: str) -> None:
    """The export's CSV is csv.writer's rendering of the rows the records API lists, value by value."""
    for email in ("admin@acme.example", "bob@acme.example", "frank@acme.example"):
        ctx = await load_user_context_by_email(email)
        for name in DATASETS:
            if not ctx.can(name):
                continue
            rows, total = await api_rows(ctx, name)
            export = (await visible_rows(ctx, name, CAP)).export()
            assert export.csv == api_csv(export.columns, rows), (email, name)
            assert (export.rows, export.visible_total) == (len(rows), total)
            assert export.versions == {r["id"]: r["version"] for r in rows}


@pytest.mark.sqlite  # the dataset's name is checked before any query, not an engine's
async def test_unknown_dataset_is_404_and_nothing_is_written(demo_db: str, tmp_path: Path) -> None:
    from backend.errors import NotFound

    ctx = await load_user_context_by_email("admin@acme.example")
    with pytest.raises(NotFound) as err:
        await stage(ctx, ["deals", "widgets"], [], tmp_path / "b")
    assert "widgets" in str(err.value.detail) and "deals" in err.value.detail["valid_datasets"]
    assert not (tmp_path / "b").exists()


# --- truncation ---------------------------------------------------------------------------------------


async def test_admin_tasks_are_truncated_and_say_so(demo_db: str, tmp_path: Path) -> None:
    ctx = await load_user_context_by_email("admin@acme.example")
    bundle = await stage(ctx, ["tasks", "deals"], [], tmp_path / "b")
    entries = {
        f["source"]["dataset"]: f for f in bundle.manifest["files"] if f["source"]["type"] == "dataset"
    }
    tasks, deals = entries["tasks"], entries["deals"]
    total = await DATASETS["tasks"].table.count().where(DATASETS["tasks"].table.company == ctx.company_id)
    assert tasks["truncated"] is True and tasks["visible_total"] == total > CAP
    assert tasks["rows"] == CAP == len(csv_ids(tmp_path / "b" / tasks["path"]))
    assert bundle.manifest["row_cap"] == CAP
    # positive control: deals fit under the cap and are not marked
    assert deals["truncated"] is False and deals["rows"] == deals["visible_total"]
    readme = (tmp_path / "b" / "README.txt").read_text()
    tasks_line = next(line for line in readme.splitlines() if "datasets/tasks.csv" in line)
    deals_line = next(line for line in readme.splitlines() if "datasets/deals.csv" in line)
    assert "TRUNCATED" in tasks_line and f"{total} rows" in tasks_line and f"first {CAP}" in tasks_line
    assert "TRUNCATED" not in deals_line
    on_disk = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert on_disk["bundle_sha256"] == bundle.bundle_sha256
    assert next(f for f in on_disk["files"] if f["path"] == tasks["path"])["truncated"] is True


async def test_a_smaller_cap_truncates_what_fits_otherwise(demo_db: str, tmp_path: Path) -> None:
    ctx = await load_user_context_by_email("bob@acme.example")
    full = await stage(ctx, ["deals"], [], tmp_path / "full")
    capped = await stage(ctx, ["deals"], [], tmp_path / "capped", row_cap=10)
    f, c = full.manifest["files"][0], capped.manifest["files"][0]
    assert f["truncated"] is False and c["truncated"] is True
    assert c["rows"] == 10 and c["visible_total"] == f["rows"]
    assert csv_ids(tmp_path / "capped" / c["path"]) == csv_ids(tmp_path / "full" / f["path"])[:10]


# the CLI's report of a truncation, not an engine's (the truncation itself on PostgreSQL: the two tests above;
# a CLI against PostgreSQL: tests/audit/test_audit_anchor's and test_audit_chain's verify)
@pytest.mark.sqlite
def test_cli_stage_marks_tasks_truncated(demo_db: str, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    r = subprocess.run(
        [CLEANROOM, "stage", "--as", "admin@acme.example", "--datasets", "deals,tasks", "--out", str(out)],
        env={**os.environ, "DATABASE_URL": demo_db},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    entries = {f["source"]["dataset"]: f for f in manifest["files"] if f["source"]["type"] == "dataset"}
    assert entries["tasks"]["truncated"] is True and entries["tasks"]["rows"] == CAP
    assert entries["tasks"]["visible_total"] > CAP
    assert entries["deals"]["truncated"] is False
    assert (
        f"datasets/tasks.csv: {CAP} rows  TRUNCATED ({entries['tasks']['visible_total']} visible)" in r.stdout
    )
    assert f"bundle {manifest['bundle_sha256']}" in r.stdout
    with (out / "datasets" / "tasks.csv").open() as fh:
        assert sum(1 for _ in csv.reader(fh)) == CAP + 1
    assert "TRUNCATED" in (out / "README.txt").read_text()


@pytest.mark.sqlite  # the permission is checked before any query, not an engine's (see the mark above)
def test_cli_stage_refuses_a_forbidden_dataset(demo_db: str, tmp_path: Path) -> None:
    r = subprocess.run(
        [
            CLEANROOM,
            "stage",
            "--as",
            "bob@acme.example",
            "--datasets",
            "deals,employees",
            "--out",
            str(tmp_path),
        ],
        env={**os.environ, "DATABASE_URL": demo_db},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "employees" in r.stderr and "deals" not in r.stderr.split("permitted:")[-1]
    assert not (tmp_path / "manifest.json").exists()


async def test_export_inside_a_transaction_sees_its_own_writes(demo_db: str) -> None:
    from backend.records import tables as rt

    ctx = await load_user_context_by_email("bob@acme.example")
    first = (await visible_rows(ctx, "deals", CAP)).export().csv
    deal_id = int(first.decode().splitlines()[1].split(",")[0])
    async with rt.Deal._meta.db.transaction():
        await rt.Deal.update({rt.Deal.notes: "edited, inside the transaction"}).where(rt.Deal.id == deal_id)
        inside = (await visible_rows(ctx, "deals", CAP)).export()
        rows, _ = await api_rows(ctx, "deals")
        assert inside.csv == api_csv(inside.columns, rows)
        assert b'"edited, inside the transaction"' in inside.csv and inside.csv != first
