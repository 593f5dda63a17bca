"""Download names through the real API: a name outside Latin-1 downloads (RFC 5987 `filename*` plus an ASCII
`filename`), and a hostile name cannot end the header value or start a header of its own.

The upload refuses CR/LF in a name, so the hostile row is written as a run output or an older row could
be: straight into the table. The positive control: a plain ASCII name comes back unchanged in both forms.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

from backend.drive.controller import content_disposition
from backend.drive.tables import DriveFile
from tests.support.http import token_for

pytestmark = pytest.mark.sqlite  # the header's encoding, not an engine's

BODY = b"region,amount\nEast,1200\n"


async def _upload(client, headers, name: str) -> int:
    r = await client.post(
        "/api/drive/files", files={"file": (name, BODY, "application/octet-stream")}, headers=headers
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _names(header: str) -> tuple[str, str]:
    """(the ASCII `filename`, the decoded `filename*`) of a Content-Disposition value."""
    match = re.fullmatch(r'attachment; filename="([^"\\]*)"; filename\*=UTF-8\'\'([A-Za-z0-9%._~-]*)', header)
    assert match, header
    return match[1], unquote(match[2], errors="strict")


async def test_non_latin1_name_downloads_and_decodes_back(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    name = "Überblick – 売上.csv"
    r = await client.get(f"/api/drive/files/{await _upload(client, alice, name)}/content", headers=alice)
    assert r.status_code == 200 and r.content == BODY
    fallback, decoded = _names(r.headers["content-disposition"])
    assert decoded == name
    assert fallback.isascii() and fallback.startswith("Uberblick") and fallback.endswith(".csv")


async def test_ascii_name_is_unchanged_in_both_forms(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    r = await client.get(
        f"/api/drive/files/{await _upload(client, alice, 'q4 regions.csv')}/content", headers=alice
    )
    assert r.status_code == 200
    assert _names(r.headers["content-disposition"]) == ("q4 regions.csv", "q4 regions.csv")


async def test_quotes_and_line_breaks_cannot_inject_headers(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    file_id = await _upload(client, alice, 'report".csv')
    name = 'a"; filename="evil.exe\r\nSet-Cookie: session=stolen\r\nX-Injected: 1\\.csv'
    await DriveFile.update({DriveFile.name: name}).where(DriveFile.id == file_id)
    r = await client.get(f"/api/drive/files/{file_id}/content", headers=alice)
    assert r.status_code == 200 and r.content == BODY
    assert "x-injected" not in r.headers and "set-cookie" not in r.headers
    header = r.headers["content-disposition"]
    assert "\r" not in header and "\n" not in header
    fallback, decoded = _names(header)
    assert decoded == name
    assert '"' not in fallback and "\\" not in fallback


def test_fallback_drops_every_control_character() -> None:
    header = content_disposition("a\x00b\x7fc\x85d\u2028e.csv")
    fallback, decoded = _names(header)
    assert fallback == "abcd_e.csv" and decoded == "a\x00b\x7fc\x85d\u2028e.csv"
    assert _names(content_disposition('"\\'))[0] == "download"
