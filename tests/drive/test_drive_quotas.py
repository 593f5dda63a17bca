"""Drive is bounded: an upload is copied to disk in chunks (never read whole), a person and a company keep at
most their quotas, and a person uploads at most so many files an hour. Each attack is the assistant's token
filling the shared disk; each has its positive control (another person, a raised quota, a smaller file)."""

from __future__ import annotations

import io

from backend.drive import service as drive
from backend.hashing import CHUNK
from backend.settings import get_settings
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company
from tests.conftest import login, token_for
from tests.drive.test_drive import _upload

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


async def test_a_person_over_their_quota_is_refused_and_another_still_uploads(client) -> None:
    await _set(drive_quota_mb_per_user=1)
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    first = await _upload(client, alice, "a.bin", b"a" * (700 * 1024))
    assert first.status_code == 201, first.text
    r = await _upload(client, alice, "b.bin", b"b" * (400 * 1024))
    assert r.status_code == 413, r.text
    body = r.json()
    assert body["error"] == "drive_quota_exceeded" and "quota is 1 MB" in body["detail"]["message"]
    assert body["detail"]["scope"] == "user"
    names = {f["name"] for f in (await client.get("/api/drive/files?all=true", headers=alice)).json()}
    assert "b.bin" not in names and _leftovers() == []
    assert (await _upload(client, bob, "b.bin", b"b" * (400 * 1024))).status_code == 201  # control
    assert (await _upload(client, alice, "small.bin", b"s" * (300 * 1024))).status_code == 201  # fits


async def test_the_company_quota_counts_everyone(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    gina = await token_for(client, "gina@globex.example")
    await _set(drive_quota_mb_per_company=1)
    # the demo company's own files already fill part of it; fill the rest
    r = await _upload(client, alice, "big.bin", b"a" * MB)
    assert r.status_code == 413 and r.json()["detail"]["scope"] == "company", r.text
    r = await _upload(client, bob, "big.bin", b"a" * MB)
    assert r.status_code == 413 and r.json()["detail"]["scope"] == "company", r.text
    assert (await _upload(client, gina, "big.bin", b"a" * MB)).status_code == 201  # another company: control
    await _set(drive_quota_mb_per_company=20480)
    assert (await _upload(client, alice, "big.bin", b"a" * MB)).status_code == 201  # raised: control


async def test_uploads_per_hour_are_limited_per_person(client) -> None:
    await _set(drive_uploads_per_hour=3)
    alice = await token_for(client, "alice@acme.example")
    bob = await token_for(client, "bob@acme.example")
    for i in range(3):
        assert (await _upload(client, alice, f"{i}.txt", b"hello\n")).status_code == 201
    r = await _upload(client, alice, "3.txt", b"hello\n")
    assert r.status_code == 429 and r.json()["error"] == "too_many_uploads", r.text
    assert "limit is 3 per person per hour" in r.json()["detail"]["message"]
    assert (await _upload(client, bob, "0.txt", b"hello\n")).status_code == 201  # control


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
