"""Drive is bounded: an upload is copied to disk in chunks (never read whole), a person and a company keep at
most their quotas, and a person uploads at most so many files an hour. Each attack is the assistant's token
filling the shared disk; each has its positive control (another person, a raised quota, a smaller file)."""

from __future__ import annotations

import asyncio
import io
import threading

import pytest

from backend import clock
from backend.drive import service as drive
from backend.drive.tables import DriveFile
from backend.hashing import CHUNK
from backend.settings import get_settings
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company
from tests.support.concurrency import _meet_or_see_blocked
from tests.support.drive import _upload
from tests.support.http import login, token_for

MB = 1024 * 1024


def _leftovers() -> list[str]:
    root = get_settings().data_dir / "blobs"
    return sorted(p.name for p in root.glob(".upload-*")) if root.exists() else []


async def _set(**values: int) -> None:
    await Company.update({getattr(Company, k): v for k, v in values.items()}).where(
        Company.name == "Acme Analytics"
    )


class EndlessStream:
    """What a hostile client streams: more bytes than any limit, with no size to read up front (not
    seekable). Counts what the server pulled from it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        n = CHUNK if n is None or n < 0 else n
        self.read_bytes += n
        return b"x" * n

    def tell(self) -> int:
        raise OSError("not seekable")


@pytest.mark.sqlite  # the cut comes while the body is read, before the database
async def test_an_endless_upload_is_cut_at_the_limit_and_leaves_nothing(client, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "max_upload_bytes", 3 * MB)
    alice = await load_user_context_by_email("alice@acme.example")
    stream = EndlessStream()
    try:
        await drive.upload(alice, "endless.bin", stream)  # type: ignore[arg-type]
        raise AssertionError("an endless upload was filed")
    except drive.TooLarge as exc:
        assert "3,145,728 bytes" in str(exc.detail)
    # read no further than the limit and one chunk: never the whole body, never into memory at once
    assert stream.read_bytes <= 3 * MB + CHUNK
    assert _leftovers() == []
    ok = await drive.upload(alice, "fits.bin", io.BytesIO(b"y" * (3 * MB)))  # control: at the limit
    assert ok["size"] == 3 * MB and _leftovers() == []


# the quota's sums compared in Python (on PostgreSQL under two processes: the two-uploads tests below)
@pytest.mark.sqlite
async def test_a_person_over_their_quota_is_refused_and_another_still_uploads(client) -> None:
    await _set(drive_quota_mb_per_user=1)
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    first = await _upload(client, alice, "a.bin", b"a" * (700 * 1024))
    assert first.status_code == 201, first.text
    r = await _upload(client, alice, "b.bin", b"b" * (400 * 1024))
    assert r.status_code == 413, r.text
    body = r.json()
    assert body["error"] == "drive_quota_exceeded" and "quota is 1 MB" in body["detail"]
    assert body["scope"] == "user"
    names = {f["name"] for f in (await client.get("/api/drive/files?all=true", headers=alice)).json()}
    assert "b.bin" not in names and _leftovers() == []
    assert (await _upload(client, bob, "b.bin", b"b" * (400 * 1024))).status_code == 201  # control
    assert (await _upload(client, alice, "small.bin", b"s" * (300 * 1024))).status_code == 201  # fits


# the quota's sums compared in Python (on PostgreSQL under two processes: the two-uploads tests below)
@pytest.mark.sqlite
async def test_the_company_quota_counts_everyone(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    gina = await token_for(client, "gina@globex.example")
    await _set(drive_quota_mb_per_company=1)
    # the demo company's own files already fill part of it; fill the rest
    r = await _upload(client, alice, "big.bin", b"a" * MB)
    assert r.status_code == 413 and r.json()["scope"] == "company", r.text
    r = await _upload(client, bob, "big.bin", b"a" * MB)
    assert r.status_code == 413 and r.json()["scope"] == "company", r.text
    assert (await _upload(client, gina, "big.bin", b"a" * MB)).status_code == 201  # another company: control
    await _set(drive_quota_mb_per_company=20480)
    assert (await _upload(client, alice, "big.bin", b"a" * MB)).status_code == 201  # raised: control


# the hourly count compared in Python (the rate on PostgreSQL under two processes: the two-uploads tests
# below)
@pytest.mark.sqlite
async def test_uploads_per_hour_are_limited_per_person(client) -> None:
    await _set(drive_uploads_per_hour=3)
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    for i in range(3):
        assert (await _upload(client, alice, f"{i}.txt", b"hello\n")).status_code == 201
    r = await _upload(client, alice, "3.txt", b"hello\n")
    assert r.status_code == 429 and r.json()["error"] == "too_many_uploads", r.text
    assert "limit is 3 per person per hour" in r.json()["detail"]
    assert (await _upload(client, bob, "0.txt", b"hello\n")).status_code == 201  # control


@pytest.mark.sqlite  # who may change a setting, the app's, not an engine's
async def test_quotas_are_company_settings_an_admin_changes_and_a_member_cannot(client) -> None:
    await login(client, "alice@acme.example")
    r = await client.patch("/api/company/settings", json={"drive_quota_mb_per_user": 10})
    assert r.status_code == 403, r.text
    await login(client, "admin@acme.example")
    r = await client.patch(
        "/api/company/settings",
        json={"drive_quota_mb_per_user": 10, "drive_quota_mb_per_company": 100, "drive_uploads_per_hour": 50},
    )
    assert r.status_code == 200, r.text
    got = (await client.get("/api/company/settings")).json()
    assert (
        got["drive_quota_mb_per_user"],
        got["drive_quota_mb_per_company"],
        got["drive_uploads_per_hour"],
    ) == (
        10,
        100,
        50,
    )
    r = await client.patch("/api/company/settings", json={"drive_quota_mb_per_user": 0})
    assert r.status_code in (400, 422), r.text


# --- across processes (security review 2026-12-06, D-L5) ------------------------------------------------
# The guard was an asyncio lock per process (per event loop): under `serve --processes N`, N uploads fitted the
# same room. Here two uploads run at once as two API processes would: one in the test's event loop, one in an
# event loop of its own in another thread, each with its own connections to one PostgreSQL database and (under
# the old guard) its own lock; both past reading their bytes before either checks. One fits and one is refused:
# the guard is the company's row, held in the database. The control takes the row lock away (what a guard of
# each process's own amounts to across processes) and the same two both land past the room.


async def _room_for_one(kind: str, ctx) -> tuple[int, type[Exception]]:
    """Set Acme's limits so one more upload of the returned size fits and a second does not."""
    if kind == "rate":
        since = clock.now() - drive.UPLOAD_WINDOW
        recent = await DriveFile.count().where(
            (DriveFile.owner == ctx.user_id) & DriveFile.run_id.is_null() & (DriveFile.created_at >= since)
        )
        await _set(drive_uploads_per_hour=recent + 1)
        return 64, drive.TooManyUploads
    used = int(await drive._used(DriveFile.company == ctx.company_id))
    quota_mb = used // MB + 2
    await _set(drive_quota_mb_per_company=quota_mb)
    room = quota_mb * MB - used
    return room // 2 + 1, drive.QuotaExceeded


async def _two_processes_at_once(monkeypatch, dsn: str, kind: str) -> tuple[list[object], type[Exception]]:
    alice = await load_user_context_by_email("alice@acme.example")
    size, refusal = await _room_for_one(kind, alice)
    both_received = threading.Barrier(2, timeout=60)
    sniff, check = drive._kind_of_file, drive._check_quota
    arrived: list[int] = []

    def received_then_meet(path, name):  # each upload's bytes are on disk before either checks its room
        kind_of = sniff(path, name)
        both_received.wait()
        return kind_of

    async def checked_then_meet(ctx, incoming: int) -> None:
        await check(ctx, incoming)
        if incoming:
            await asyncio.to_thread(_meet_or_see_blocked, arrived, dsn)

    monkeypatch.setattr(drive, "_kind_of_file", received_then_meet)
    monkeypatch.setattr(drive, "_check_quota", checked_then_meet)

    async def upload(i: int) -> object:
        try:
            return await drive.upload(alice, f"{kind}-{i}.bin", b"x" * size)
        except Exception as exc:  # noqa: BLE001 - the refusal is the answer
            return exc

    answers = await asyncio.gather(upload(0), asyncio.to_thread(asyncio.run, upload(1)))
    return list(answers), refusal


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["quota", "rate"])
async def test_two_uploads_at_once_from_two_processes_into_room_for_one_land_one(
    client, demo_db, monkeypatch, kind: str
) -> None:
    answers, refusal = await _two_processes_at_once(monkeypatch, demo_db, kind)
    assert sorted(type(a).__name__ for a in answers) == sorted(["dict", refusal.__name__]), answers
    names = {
        r["name"] for r in await DriveFile.select(DriveFile.name).where(DriveFile.name.like(f"{kind}-%"))
    }
    assert len(names) == 1 and _leftovers() == []  # the refused one left no row and no stray bytes


@pytest.mark.postgres
async def test_control_without_the_company_row_lock_both_land_past_the_room(
    client, demo_db, monkeypatch
) -> None:
    async def no_lock(company_id: int) -> None:
        return None

    monkeypatch.setattr(drive, "lock_company", no_lock)
    check = drive._check_quota
    answers, _ = await _two_processes_at_once(monkeypatch, demo_db, "quota")
    assert [type(a).__name__ for a in answers] == ["dict", "dict"], answers
    alice = await load_user_context_by_email("alice@acme.example")
    with pytest.raises(drive.QuotaExceeded):  # the company is now past its quota
        await check(alice, 0)
