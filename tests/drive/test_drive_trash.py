"""Deleting a Drive file (issue 54): to a trash its owner can restore from for 30 days, then purged with its
quota freed; sharing changed by the owner. Each refusal is a hostile party beside its control: a colleague
(403), another company (404, as for a file that does not exist), the owner's own assistant token (403
person_required, audited), a restore past 30 days (410, and the file purged)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from backend import clock
from backend.audit.tables import AuditEntry
from backend.drive import blobs
from backend.drive import service as drive
from backend.tenancy.tables import Company
from tests.support.drive import _upload
from tests.support.http import login, token_for

KB = 1024


async def _as(client, email: str) -> dict:
    """Signed in as `email` (a person's session cookie, as the console holds it); no other headers."""
    client.cookies.clear()
    await login(client, email)
    return {}


async def _actions(file_id: int) -> list[str]:
    rows = await AuditEntry.select(AuditEntry.action).where(
        AuditEntry.subject_type == "drive_file", AuditEntry.subject_id == str(file_id)
    )
    return [r["action"] for r in rows]


# who may delete and restore, the app's (the purge's dates on both engines: the 30-day test)
@pytest.mark.sqlite
async def test_only_the_owner_deletes_and_restores(client) -> None:
    alice_token = await token_for(client, "alice@acme.example")
    r = await _upload(client, alice_token, "shared.csv", b"a,b\n1,2\n", visibility="company")
    assert r.status_code == 201, r.text  # the assistant may upload
    file_id = r.json()["id"]

    # her own assistant: a person's decision, refused and audited like every token refusal
    r = await client.delete(f"/api/drive/files/{file_id}", headers=alice_token)
    assert r.status_code == 403 and r.json()["error"] == "person_required", r.text
    refusals = await AuditEntry.select(AuditEntry.data).where(AuditEntry.action == "auth.person_required")
    assert any(f"/api/drive/files/{file_id}" in str(e["data"]) for e in refusals)
    # a colleague who sees the file (company-wide) does not own it
    await _as(client, "bob@acme.example")
    r = await client.delete(f"/api/drive/files/{file_id}")
    assert r.status_code == 403 and r.json()["error"] == "not_owner", r.text
    # another company: the same 404 as a file that does not exist
    await _as(client, "gina@globex.example")
    r = await client.delete(f"/api/drive/files/{file_id}")
    missing = await client.delete("/api/drive/files/999999")
    assert r.status_code == missing.status_code == 404, r.text
    assert (await client.get(f"/api/drive/files/{file_id}")).status_code == 404

    await _as(client, "alice@acme.example")  # control: the owner deletes
    r = await client.delete(f"/api/drive/files/{file_id}")
    assert r.status_code == 200, r.text
    assert r.json()["purge_at"] is not None
    assert (await client.get(f"/api/drive/files/{file_id}")).status_code == 404  # gone from Drive
    assert file_id not in {f["id"] for f in (await client.get("/api/drive/files?all=true")).json()}
    assert [f["id"] for f in (await client.get("/api/drive/trash")).json()] == [file_id]

    for email, status in (("bob@acme.example", 403), ("gina@globex.example", 404)):
        await _as(client, email)
        assert file_id not in {f["id"] for f in (await client.get("/api/drive/trash")).json()}
        r = await client.post(f"/api/drive/trash/{file_id}/restore")
        assert r.status_code == status, (email, r.text)
        assert (await client.delete(f"/api/drive/trash/{file_id}")).status_code == status, email
    r = await client.post(f"/api/drive/trash/{file_id}/restore", headers=alice_token)
    assert r.status_code == 403 and r.json()["error"] == "person_required"

    await _as(client, "alice@acme.example")  # control: the owner restores
    r = await client.post(f"/api/drive/trash/{file_id}/restore")
    assert r.status_code == 200 and r.json()["trashed_at"] is None, r.text
    assert (await client.get(f"/api/drive/files/{file_id}/content")).content == b"a,b\n1,2\n"
    assert await _actions(file_id) == ["drive.uploaded", "drive.trashed", "drive.restored"]


@pytest.mark.sqlite  # who may share, the app's, not an engine's
async def test_the_owner_shares_a_file_and_nobody_else_can(client) -> None:
    alice_token = await token_for(client, "alice@acme.example")
    file_id = (await _upload(client, alice_token, "mine.txt", b"just mine\n")).json()["id"]
    body = {"visibility": "company"}
    r = await client.patch(f"/api/drive/files/{file_id}", json=body, headers=alice_token)
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    await _as(client, "bob@acme.example")
    assert (await client.get(f"/api/drive/files/{file_id}")).status_code == 404  # private: not his to see
    assert (await client.patch(f"/api/drive/files/{file_id}", json=body)).status_code == 404
    await _as(client, "alice@acme.example")
    r = await client.patch(f"/api/drive/files/{file_id}", json={"visibility": "everyone"})
    assert r.status_code == 422
    r = await client.patch(f"/api/drive/files/{file_id}", json=body)
    assert r.status_code == 200 and r.json()["visibility"] == "company", r.text
    await _as(client, "bob@acme.example")  # now he sees it, and still may not change it
    assert (await client.get(f"/api/drive/files/{file_id}")).status_code == 200
    r = await client.patch(f"/api/drive/files/{file_id}", json={"visibility": "private"})
    assert r.status_code == 403 and r.json()["error"] == "not_owner"
    assert "drive.visibility_changed" in await _actions(file_id)


async def test_after_30_days_the_trash_is_purged_and_the_quota_freed(client, monkeypatch) -> None:
    await Company.update({Company.drive_quota_mb_per_user: 1}).where(Company.name == "Acme Analytics")
    await _as(client, "alice@acme.example")
    big = (await _upload(client, {}, "big.bin", b"b" * (700 * KB))).json()
    kept = (await _upload(client, {}, "kept.bin", b"k" * (100 * KB))).json()
    for f in (big, kept):
        assert (await client.delete(f"/api/drive/files/{f['id']}")).status_code == 200
    quota = (await client.get("/api/drive/quota")).json()
    assert quota["user_trash_bytes"] == 800 * KB and quota["user_used_bytes"] >= 800 * KB
    # the trash still counts: restorable for 30 days, so its bytes are still kept
    r = await _upload(client, {}, "next.bin", b"n" * (400 * KB))
    assert r.status_code == 413 and r.json()["error"] == "drive_quota_exceeded"

    real_now = clock.now
    days = {"n": 29}
    monkeypatch.setattr(drive, "clock", SimpleNamespace(now=lambda: real_now() + timedelta(days=days["n"])))
    r = await client.post(f"/api/drive/trash/{kept['id']}/restore")  # control: day 29 restores
    assert r.status_code == 200, r.text
    days["n"] = 31
    r = await client.post(f"/api/drive/trash/{big['id']}/restore")
    assert r.status_code == 410 and r.json()["error"] == "trash_expired", r.text
    assert not blobs.blob_path(big["sha256"]).exists()  # purged: its bytes are gone
    assert blobs.blob_path(kept["sha256"]).exists()
    assert (await client.get("/api/drive/trash")).json() == []
    quota = (await client.get("/api/drive/quota")).json()
    assert quota["user_trash_bytes"] == 0
    r = await _upload(client, {}, "next.bin", b"n" * (400 * KB))
    assert r.status_code == 201, r.text  # the room the purge freed
    assert await _actions(big["id"]) == ["drive.uploaded", "drive.trashed", "drive.purged"]


# the purge's bookkeeping, the app's (the purge's dates on both engines: the 30-day test above)
@pytest.mark.sqlite
async def test_purging_now_frees_the_room_and_keeps_content_another_file_holds(client) -> None:
    await _as(client, "alice@acme.example")
    same = b"same content\n" * 100
    first = (await _upload(client, {}, "one.txt", same)).json()
    second = (await _upload(client, {}, "two.txt", same)).json()  # the same blob
    assert first["sha256"] == second["sha256"]
    r = await client.delete(f"/api/drive/trash/{first['id']}")
    assert r.status_code == 404  # only a file in the trash is purged
    await client.delete(f"/api/drive/files/{first['id']}")
    before = (await client.get("/api/drive/quota")).json()["user_used_bytes"]
    assert (await client.delete(f"/api/drive/trash/{first['id']}")).status_code == 204
    assert (await client.get("/api/drive/quota")).json()["user_used_bytes"] == before - len(same)
    assert (await client.get(f"/api/drive/files/{second['id']}/content")).content == same
    await client.delete(f"/api/drive/files/{second['id']}")
    assert (await client.delete(f"/api/drive/trash/{second['id']}")).status_code == 204
    assert not blobs.blob_path(second["sha256"]).exists()  # the last holder purged: the blob goes


@pytest.mark.sqlite  # who may delete and restore, the app's, not an engine's
async def test_an_admin_deletes_a_members_file_which_stays_the_members_to_restore(client) -> None:
    await _as(client, "alice@acme.example")
    file_id = (await _upload(client, {}, "left-behind.csv", b"a\n1\n")).json()["id"]  # private
    await _as(client, "admin@globex.example")  # another company's admin: as if it did not exist
    assert (await client.delete(f"/api/drive/files/{file_id}")).status_code == 404
    await _as(client, "admin@acme.example")  # the company's admin runs its Drive
    assert (await client.delete(f"/api/drive/files/{file_id}")).status_code == 200
    assert file_id in {f["id"] for f in (await client.get("/api/drive/trash")).json()}
    await _as(client, "alice@acme.example")  # still hers: in her trash, and she restores it
    assert [f["id"] for f in (await client.get("/api/drive/trash")).json()] == [file_id]
    assert (await client.post(f"/api/drive/trash/{file_id}/restore")).status_code == 200
    trashed = await AuditEntry.select(AuditEntry.actor).where(
        AuditEntry.action == "drive.trashed", AuditEntry.subject_id == str(file_id)
    )
    assert ["admin@acme.example" in e["actor"] for e in trashed] == [True]
