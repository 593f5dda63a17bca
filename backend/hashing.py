"""The one hashing helper: every sha256 in the product (approvals, manifests, audit, blobs) comes from here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import IO, Any

CHUNK = 1024 * 1024


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class StreamTooLong(Exception):
    """`copy_hashed` went past its limit."""


def copy_hashed(source: IO[bytes], target: IO[bytes], limit: int) -> tuple[str, int]:
    """Copy `source` to `target` in chunks (never whole in memory), hashing on the way: (sha256, size).
    Raises StreamTooLong past `limit` bytes."""
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(CHUNK):
        size += len(chunk)
        if size > limit:
            raise StreamTooLong(size)
        digest.update(chunk)
        target.write(chunk)
    return digest.hexdigest(), size


def canonical_json(value: Any) -> bytes:
    """Stable bytes for a JSON value: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode(
        "utf-8"
    )


def sha256_json(value: Any) -> str:
    return sha256_bytes(canonical_json(value))


def salted_digest(salt: bytes, value: Any) -> str:
    """sha256(salt || canonical JSON of `value`): a digest of contents that whoever lacks the salt cannot test
    guesses against (a salary, a rating: few likely values)."""
    return sha256_bytes(salt + canonical_json(value))


def sha256_stream() -> Any:
    """An incremental sha256 (update with bytes, hexdigest at the end): a streamed file's digest."""
    return hashlib.sha256()
