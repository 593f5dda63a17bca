"""Drive through the real API and the real CLI: upload (multipart), download, list, folders, the size limit,
type sniffed from content, and visibility by the records' rule (private, manager, other company)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.demo.files import PRICE_LIST_NAME, demo_drive_files
from backend.settings import get_settings
from tests.support.drive import _upload
from tests.support.http import console_origin, token_for

CLEANROOM = str(Path(sys.executable).parent / "cleanroom")
PDF = dict(demo_drive_files())[PRICE_LIST_NAME]


async def test_upload_download_list_and_folders(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    r = await client.post("/api/drive/folders", json={"name": "Q4 analysis"}, headers=alice)
    assert r.status_code == 201, r.text
    folder = r.json()

    body = b"region,amount\nEast,1200\nWest,900\n"
    r = await _upload(client, alice, "regions.csv", body, folder_id=folder["id"])
    assert r.status_code == 201, r.text
    up = r.json()
    assert up["size"] == len(body) and up["kind"] == "csv" and up["folder_id"] == folder["id"]
    assert up["visibility"] == "private"
    r = await _upload(client, alice, "loose.txt", b"not in a folder\n")
    assert r.status_code == 201, r.text
    loose = r.json()

    r = await client.get(f"/api/drive/files/{up['id']}/content", headers=alice)
    assert r.status_code == 200 and r.content == body
    assert r.headers["content-type"].startswith("text/csv")
    r = await client.get(f"/api/drive/files/{up['id']}", headers=alice)
    assert r.json()["sha256"] == up["sha256"]

    in_folder = (
        await client.get("/api/drive/files", params={"folder_id": folder["id"]}, headers=alice)
    ).json()
    assert [f["id"] for f in in_folder] == [up["id"]]
    at_root = {f["id"] for f in (await client.get("/api/drive/files", headers=alice)).json()}
    assert loose["id"] in at_root and up["id"] not in at_root
    everything = {f["id"] for f in (await client.get("/api/drive/files?all=true", headers=alice)).json()}
    assert {loose["id"], up["id"]} <= everything
    folders = (await client.get("/api/drive/folders", headers=alice)).json()
    assert folder["id"] in {f["id"] for f in folders}

    r = await _upload(client, alice, "x.csv", body, folder_id=999_999)
    assert r.status_code == 404  # no such folder (or not hers): nothing is stored


@pytest.mark.sqlite  # the size check and the sniffing come before the database (both engines: the tests around)
async def test_size_limit_answers_413_with_the_limit(client, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "max_upload_bytes", 1000)
    alice = await token_for(client, "alice@acme.example")
    ok = await _upload(client, alice, "fits.txt", b"a" * 1000)
    assert ok.status_code == 201, ok.text  # positive control: exactly at the limit
    r = await _upload(client, alice, "big.txt", b"a" * 1001)
    assert r.status_code == 413
    body = r.json()
    assert body["error"] == "file_too_large"
    assert "1,001 bytes" in body["detail"] and "1,000 bytes" in body["detail"]
    names = {f["name"] for f in (await client.get("/api/drive/files?all=true", headers=alice)).json()}
    assert "fits.txt" in names and "big.txt" not in names


@pytest.mark.sqlite  # the size check and the sniffing come before the database (both engines: the tests around)
@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("prices.txt", PDF, "pdf"),  # a PDF named .txt is a PDF
        ("notes.txt", b"plain words\n", "text"),  # positive control
        ("table.pdf", b"a,b\n1,2\n", "text"),  # not a PDF, whatever the name
        ("logo.txt", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image"),
    ],
)
async def test_type_is_sniffed_from_content(client, name, data, kind) -> None:
    alice = await token_for(client, "alice@acme.example")
    r = await _upload(client, alice, name, data)
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == kind


@pytest.mark.sqlite  # the size check and the sniffing come before the database (both engines: the tests around)
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("Payroll.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 1000),  # old/encrypted Office container
        ("archive.zip", b"PK\x05\x06" + b"\0" * 18),
        ("tool.bin", bytes(range(256)) * 4),
    ],
)
async def test_unconvertible_files_are_still_stored(client, name, data) -> None:
    """The Drive keeps any file; staging reports what it cannot convert (see test_stage_bundle)."""
    alice = await token_for(client, "alice@acme.example")
    r = await _upload(client, alice, name, data)
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "binary"
    got = await client.get(f"/api/drive/files/{r.json()['id']}/content", headers=alice)
    assert got.content == data


async def test_private_file_visible_to_owner_manager_admin_only(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    r = await _upload(client, alice, "alice-private.csv", b"a,b\n1,2\n")
    file_id = r.json()["id"]
    missing = await client.get("/api/drive/files/999999", headers=alice)
    assert missing.status_code == 404

    for email, status in [
        ("alice@acme.example", 200),
        ("maria@acme.example", 200),  # her manager (team East)
        ("admin@acme.example", 200),
        ("bob@acme.example", 404),  # a peer in another team
        ("wendy@acme.example", 404),  # a manager, but of West
        ("admin@globex.example", 404),  # another company, even its admin
    ]:
        headers = await token_for(client, email)
        meta = await client.get(f"/api/drive/files/{file_id}", headers=headers)
        content = await client.get(f"/api/drive/files/{file_id}/content", headers=headers)
        listed = {f["id"] for f in (await client.get("/api/drive/files?all=true", headers=headers)).json()}
        assert meta.status_code == content.status_code == status, email
        assert (file_id in listed) == (status == 200), email
        if status == 404:  # indistinguishable from a file that does not exist
            assert meta.json()["error"] == missing.json()["error"] == "not_found"
            assert meta.json()["detail"].replace(str(file_id), "N") == missing.json()["detail"].replace(
                "999999", "N"
            )


# the company's filter, the app's (Drive's visibility rule on both engines: the private-file test above)
@pytest.mark.sqlite
async def test_another_companys_file_answers_404(client) -> None:
    globex = await token_for(client, "gina@globex.example")
    r = await _upload(client, globex, "globex-plan.csv", b"x\n1\n", visibility="company")
    assert r.status_code == 201
    file_id = r.json()["id"]
    assert (await client.get(f"/api/drive/files/{file_id}", headers=globex)).status_code == 200
    acme_admin = await token_for(client, "admin@acme.example")
    assert (await client.get(f"/api/drive/files/{file_id}", headers=acme_admin)).status_code == 404
    assert (await client.get(f"/api/drive/files/{file_id}/content", headers=acme_admin)).status_code == 404
    listed = (await client.get("/api/drive/files?all=true", headers=acme_admin)).json()
    assert file_id not in {f["id"] for f in listed}
    assert len(listed) >= 4  # positive control: the admin does see Acme's demo files


@pytest.mark.sqlite  # the rule the private-file test above runs on both engines, here for a team
async def test_team_file_is_shared_with_the_team_only(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    r = await _upload(client, alice, "east-team.csv", b"a\n1\n", visibility="team")
    file_id = r.json()["id"]
    maria = await token_for(client, "maria@acme.example")
    bob = await token_for(client, "bob@acme.example")
    assert (await client.get(f"/api/drive/files/{file_id}", headers=maria)).status_code == 200
    assert (await client.get(f"/api/drive/files/{file_id}", headers=bob)).status_code == 404


# --- the CLI ---------------------------------------------------------------------------------------------


def _cli(db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLEANROOM, *args],
        env={**os.environ, "DATABASE_URL": db_url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# the CLI's commands over the service, not an engine's (uploads and listings on both engines: the first
# test)
@pytest.mark.sqlite
def test_cli_put_and_ls(demo_db: str, tmp_path: Path) -> None:
    pdf = tmp_path / "renamed.txt"
    pdf.write_bytes(PDF)
    r = _cli(demo_db, "drive", "put", str(pdf), "--as", "alice@acme.example")
    assert r.returncode == 0, r.stderr
    file_id, kind, size, name = r.stdout.strip().split("\t")
    assert (kind, int(size), name) == ("pdf", len(PDF), "renamed.txt")

    mine = _cli(demo_db, "drive", "ls", "--as", "alice@acme.example")
    assert mine.returncode == 0, mine.stderr
    assert any(line.split("\t")[0] == file_id for line in mine.stdout.splitlines())
    peer = _cli(demo_db, "drive", "ls", "--as", "bob@acme.example")
    assert peer.returncode == 0
    ids = [line.split("\t")[0] for line in peer.stdout.splitlines()]
    assert file_id not in ids and len(ids) >= 4  # bob sees the company-wide demo files, not alice's


@pytest.mark.sqlite  # the size check and the sniffing come before the database (both engines: the tests around)
def test_cli_put_refuses_a_file_over_the_limit(demo_db: str, tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(b"a\n" * 100)
    r = _cli(
        demo_db, "drive", "put", str(big), "--as", "alice@acme.example", CLEANROOM_MAX_UPLOAD_BYTES="150"
    )
    assert r.returncode != 0
    assert "200 bytes" in r.stderr and "150 bytes" in r.stderr
    ok = _cli(
        demo_db, "drive", "put", str(big), "--as", "alice@acme.example", CLEANROOM_MAX_UPLOAD_BYTES="200"
    )
    assert ok.returncode == 0, ok.stderr


@pytest.mark.sqlite  # the size check and the sniffing come before the database (both engines: the tests around)
async def test_a_body_far_over_the_limit_is_refused_before_it_is_read(demo_db: str, monkeypatch) -> None:
    """The server's body limit (the upload limit plus 1 MiB for the form) answers 413 without buffering."""
    from litestar.testing import AsyncTestClient

    from backend.app import create_app

    monkeypatch.setattr(get_settings(), "max_upload_bytes", 1000)
    app = create_app(database_url=demo_db, run_hooks=False, pool=False)
    async with AsyncTestClient(app=app) as client:
        client.headers["origin"] = console_origin()
        alice = await token_for(client, "alice@acme.example")
        r = await _upload(client, alice, "huge.bin", b"a" * (3 * 1024 * 1024))
        assert r.status_code == 413 and r.json()["error"] in ("too_large", "file_too_large")
        ok = await _upload(client, alice, "small.bin", b"a" * 1000)
        assert ok.status_code == 201  # positive control on the same app
