"""Uploading a file to Drive through the API."""

from __future__ import annotations


async def _upload(client, headers, name: str, data: bytes, **form) -> object:
    return await client.post(
        "/api/drive/files",
        files={"file": (name, data, "application/octet-stream")},
        data={k: str(v) for k, v in form.items()},
        headers=headers,
    )
