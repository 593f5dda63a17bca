"""MCP upload_file: the assistant uploads as its person, through the API with that person's token, within the
same limits as any upload: within the quota it is stored (the control), over the person's quota it is
refused with the API's reason and nothing is stored; a file past the size limit is refused before it is
sent; and deleting stays a person's decision (the same token is refused)."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.support.mcp import GINA, GLOBEX_ADMIN, ApiServer, http_client, structured, text

pytestmark = pytest.mark.slow  # the real API server the MCP tests share

KB = 1024


def _gina_files(server: ApiServer) -> set[str]:
    with server.session(GINA) as gina:
        return {f["name"] for f in gina.get("/api/drive/files", params={"all": "true"}).json()}


async def test_upload_within_the_quota_is_stored_and_over_it_is_refused(api_server: ApiServer) -> None:
    with api_server.session(GLOBEX_ADMIN) as admin:
        before = admin.get("/api/company/settings").json()["drive_quota_mb_per_user"]
        assert admin.patch("/api/company/settings", json={"drive_quota_mb_per_user": 1}).status_code == 200
    token, _ = api_server.token(GINA)
    try:
        async with http_client(api_server, token) as client:
            fits = base64.b64encode(b"f" * (600 * KB)).decode()
            stored = structured(
                await client.call_tool(
                    "upload_file", {"name": "fits.bin", "content": fits, "encoding": "base64"}
                )
            )
            assert stored["file"]["name"] == "fits.bin" and stored["file"]["size"] == 600 * KB
            assert stored["user_quota_bytes"] == 1024 * KB and stored["user_used_bytes"] >= 600 * KB
            notes = structured(
                await client.call_tool("upload_file", {"name": "notes.md", "content": "# Q4\nEast grew.\n"})
            )
            assert notes["file"]["kind"] == "markdown"

            over = base64.b64encode(b"o" * (500 * KB)).decode()
            refused = await client.call_tool(
                "upload_file", {"name": "over.bin", "content": over, "encoding": "base64"}
            )
            assert refused.is_error and "drive_quota_exceeded" in text(refused), text(refused)
            assert "quota is 1 MB" in text(refused)
            bad = await client.call_tool("upload_file", {"name": "a/b.txt", "content": "x"})
            assert bad.is_error and "not a usable file name" in text(bad), text(bad)
    finally:
        with api_server.session(GLOBEX_ADMIN) as admin:
            admin.patch("/api/company/settings", json={"drive_quota_mb_per_user": before})
    names = _gina_files(api_server)
    assert {"fits.bin", "notes.md"} <= names and not {"over.bin", "b.txt", "a/b.txt"} & names

    # the same token may upload, never delete: a person's decision
    file_id = stored["file"]["id"]
    async with httpx.AsyncClient(base_url=api_server.api_url) as http:
        r = await http.delete(f"/api/drive/files/{file_id}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 403 and r.json()["error"] == "person_required"
