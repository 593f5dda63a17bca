"""Imports and syncs as background jobs (records/jobs.py), written as the hostile parties beside their controls:
a member without edit cannot start an import, nor see another person's job; another company's admin gets 404
for a job (as for one that does not exist); a file over the import limit is refused at the request with
nothing written and nothing left behind; a job that fails says why and applied nothing, its file removed; a job
left running by a process that died ends `interrupted`; a sync job against a source that cannot be reached
fails with the reason, never the connection string. Controls: the admin who started it and the company's other
admins see the job; a member granted edit starts one; a file under the limit is taken."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from backend.records import jobs
from backend.records.job_tables import DatasetJob
from backend.settings import get_settings
from tests.support.http import login

CSV = b"Order ID,Amount\nO-1,10.5\nO-2,7\n"
FILE = {"file": ("o.csv", CSV, "text/csv")}
COLUMNS = [
    {"name": "order_id", "kind": "string", "nullable": True, "max_length": 1000, "enum": None},
    {"name": "amount", "kind": "number", "nullable": True, "max_length": None, "enum": None},
]
NEW = {"label": "Orders", "key_column": "order_id", "columns": json.dumps(COLUMNS)}


async def _ended(client, job_id: int) -> dict:
    await jobs.drain()  # what the worker's loop does
    answer = await client.get(f"/api/datasets/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _files() -> set[str]:
    """What the data directory holds of uploads: spooled files and jobs' kept files (the directory is this
    process's, shared by its tests: compare before and after)."""
    data = get_settings().data_dir
    return {
        str(p) for folder in (data / "tmp", data / jobs.JOBS_DIR) if folder.exists() for p in folder.iterdir()
    }


@pytest.mark.sqlite
async def test_who_starts_and_who_sees_an_import_job(client, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _files()
    await login(client, "admin@acme.example")
    started = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "false", **NEW})
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    assert len(_files() - before) == 1  # the file, kept with the queued job
    ended = await _ended(client, job_id)
    assert (
        ended["state"] == "done"
        and ended["report"]["added"] == 2
        and ended["started_by"] == "admin@acme.example"
    )
    assert _files() == before  # the kept file is gone with the job's end

    # hostile: a member with no edit on the dataset starts nothing, and sees nobody's job
    await login(client, "bob@acme.example")
    refused = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "true"})
    assert refused.status_code == 403 and refused.json()["error"] == "dataset_forbidden", refused.text
    assert (await client.post("/api/datasets/orders/sync")).status_code == 403
    hidden = await client.get(f"/api/datasets/jobs/{job_id}")
    assert hidden.status_code == 404 and hidden.json()["error"] == "unknown_job"
    # hostile: another company's admin, as for a job that does not exist
    await login(client, "admin@globex.example")
    assert (await client.get(f"/api/datasets/jobs/{job_id}")).status_code == 404
    assert (await client.get(f"/api/datasets/jobs/{job_id + 1000}")).status_code == 404
    assert await DatasetJob.count() == 1  # none of the refusals queued anything

    # control: a member granted edit starts one; they and the company's admins see it, another member not
    await login(client, "admin@acme.example")
    grid = (await client.get("/api/company/permissions")).json()
    bob = next(p["id"] for p in grid["people"] if p["email"] == "bob@acme.example")
    put = await client.put(
        "/api/company/permissions", json={"teams": {}, "people": {str(bob): {"orders": "edit"}}}
    )
    assert put.status_code == 200, put.text
    await login(client, "bob@acme.example")
    mine = await client.post(
        "/api/datasets/orders/import", files={"file": ("o.csv", CSV + b"O-3,1\n", "text/csv")}, data={}
    )
    assert mine.status_code == 202 and mine.json()["dry_run"] is True, mine.text
    assert (await _ended(client, mine.json()["id"]))["report"][
        "added"
    ] == 1  # a dry run: counted, not written
    await login(client, "alice@acme.example")
    assert (await client.get(f"/api/datasets/jobs/{mine.json()['id']}")).status_code == 404
    await login(client, "admin@acme.example")
    assert (await client.get(f"/api/datasets/jobs/{mine.json()['id']}")).json()[
        "started_by"
    ] == "bob@acme.example"
    assert (await client.get("/api/records/orders")).json()["total"] == 2

    # hostile: a file over the import limit is refused at the request; nothing written, nothing kept
    monkeypatch.setattr(get_settings(), "import_max_bytes", len(CSV) + 10)
    big = CSV + b"".join(b"O-%d,1\n" % i for i in range(10, 30))
    before = _files()
    refused = await client.post(
        "/api/datasets/orders/import", files={"file": ("o.csv", big, "text/csv")}, data={"dry_run": "false"}
    )
    assert refused.status_code == 422 and refused.json()["error"] == "too_large", refused.text
    assert "MiB import limit" in refused.json()["detail"]
    assert await DatasetJob.count() == 2 and _files() == before
    assert (await client.get("/api/records/orders")).json()["total"] == 2
    under = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "true"})
    assert under.status_code == 202 and under.json()["state"] == "queued"  # control: under the limit, taken


@pytest.mark.sqlite
async def test_a_failed_or_interrupted_job_says_why_and_applies_nothing(client) -> None:
    await login(client, "admin@acme.example")
    started = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "false", **NEW})
    assert (await _ended(client, started.json()["id"]))["state"] == "done"

    # a file without the dataset's key column: the job fails, says why, and nothing was written
    wrong = b"Reference,Amount\nO-1,99\nO-9,1\n"
    before = _files()
    job = await client.post(
        "/api/datasets/orders/import", files={"file": ("w.csv", wrong, "text/csv")}, data={"dry_run": "false"}
    )
    assert job.status_code == 202
    ended = await _ended(client, job.json()["id"])
    assert ended["state"] == "failed" and ended["error_code"] == "import_refused", ended
    assert "no column 'order_id'" in ended["error"] and "nothing was applied" in ended["error"]
    assert ended["report"] is None and _files() == before
    rows = (await client.get("/api/records/orders")).json()["items"]
    assert sorted(str(r["amount"]) for r in rows) == ["10.5", "7"]

    # a job left running by a process that is gone ends interrupted; a live one is left alone (control)
    queued = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "true"})
    dead = queued.json()["id"]
    await DatasetJob.update({DatasetJob.status: "running", DatasetJob.worker: "999999999:1.0"}).where(
        DatasetJob.id == dead
    )
    live = await client.post("/api/datasets/orders/import", files=FILE, data={"dry_run": "true"})
    from backend.sandbox.libvirt_conn import owner_token

    await DatasetJob.update({DatasetJob.status: "running", DatasetJob.worker: owner_token()}).where(
        DatasetJob.id == live.json()["id"]
    )
    dead_dir, live_dir = [
        jobs.job_dir(await DatasetJob.select(DatasetJob.file_path).where(DatasetJob.id == i).first())
        for i in (dead, live.json()["id"])
    ]
    assert dead_dir is not None and dead_dir.exists() and live_dir is not None
    orphan, fresh = (jobs.jobs_dir() / "orphan-of-a-crash", jobs.jobs_dir() / "being-queued-now")
    for folder in (orphan, fresh):
        folder.mkdir()
        (folder / "file").write_bytes(CSV)
    os.utime(orphan, (time.time() - 2 * jobs.ORPHAN_SECONDS,) * 2)
    assert await jobs.recover() == [dead]
    assert not orphan.exists() and fresh.exists()  # an old folder of no job goes; a new one may be queued
    shutil.rmtree(fresh)
    shown = (await client.get(f"/api/datasets/jobs/{dead}")).json()
    assert shown["state"] == "failed" and shown["error_code"] == "interrupted"
    assert not dead_dir.exists() and live_dir.exists()

    # a sync job: none without a source; against a source that refuses connections, failed with the reason
    assert (await client.post("/api/datasets/orders/sync")).json()["error"] == "no_source"
    secret = "postgresql://syncer:pw-never-shown-77@127.0.0.1:1/erp"
    put = await client.put("/api/datasets/orders/source", json={"connection": secret, "table": "orders"})
    assert put.status_code == 200, put.text
    sync_job = await client.post("/api/datasets/orders/sync")
    assert sync_job.status_code == 202 and sync_job.json()["kind"] == "sync"
    ended = await _ended(client, sync_job.json()["id"])
    assert ended["state"] == "failed" and ended["error_code"] == "sync_failed", ended
    assert "cannot be reached" in ended["error"] and "pw-never-shown-77" not in json.dumps(ended)
    assert (await client.get("/api/datasets/orders/source")).json()["status"] == "failed"


@pytest.fixture
def small_drive_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    """Drive's upload limit (the app's body limit for every other route) far under the file below."""
    monkeypatch.setattr(get_settings(), "max_upload_bytes", 2000)
    return 2000


@pytest.mark.sqlite
async def test_an_import_is_not_cut_at_drives_upload_limit(small_drive_limit: int, client) -> None:
    """The import route takes bodies up to `import_max_bytes` (a 1,000,000-row CSV is ~110 MiB; Drive's limit is
    100 MiB): a file over the app's body limit reaches the import. Control: Drive's own route refuses it."""
    await login(client, "admin@acme.example")
    big = CSV + b"".join(b"O-%d,1\n" % i for i in range(10, 130_000))
    assert (
        len(big) > small_drive_limit + 2**20
    )  # past the app's body limit for other routes (Drive's + 1 MiB)
    drive = await client.post("/api/drive/files", files={"file": ("o.csv", big, "text/csv")})
    assert drive.status_code == 413, drive.text
    started = await client.post(
        "/api/datasets/orders/import",
        files={"file": ("o.csv", big, "text/csv")},
        data={"dry_run": "true", **NEW},
    )
    assert started.status_code == 202, started.text
