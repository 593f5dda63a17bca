"""Content-addressed blobs under the data directory: data_dir/blobs/ab/cdef…"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend import filemodes
from backend.hashing import copy_hashed
from backend.settings import get_settings


def blob_path(digest: str) -> Path:
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError("not a sha256 hex digest")
    return get_settings().data_dir / "blobs" / digest[:2] / digest[2:]


def put(data: bytes) -> str:
    """Store `data` as a blob (the same path an upload takes): its digest."""
    return keep(receive_bytes(data))


def get(digest: str) -> bytes:
    return blob_path(digest).read_bytes()


@dataclass(frozen=True)
class Received:
    """An upload streamed to a private temporary file in the blob store, hashed on the way: not yet a
    blob until `keep` (a refused upload is `discard`ed and leaves nothing)."""

    path: Path
    digest: str
    size: int


def receive(stream: BinaryIO, limit: int) -> Received:
    """Copy `stream` in chunks (never whole in memory), at most `limit` bytes (past it StreamTooLong,
    and nothing is kept)."""
    root = get_settings().data_dir / "blobs"
    filemodes.private_dir(root)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as fh:
            digest, size = copy_hashed(stream, fh, limit)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Received(Path(tmp), digest, size)


def keep(received: Received) -> str:
    path = blob_path(received.digest)
    if path.exists():  # the same content is stored already
        received.path.unlink(missing_ok=True)
    else:
        filemodes.private_dir(path.parent)
        os.replace(received.path, path)
    return received.digest


def discard(received: Received) -> None:
    received.path.unlink(missing_ok=True)


def receive_bytes(data: bytes) -> Received:
    """`receive` for content already in memory (a run's output, the CLI, the demo seed)."""
    return receive(io.BytesIO(data), len(data))


def remove(digest: str) -> None:
    """Delete a blob no file holds any more (the caller checked, under the service's blob lock)."""
    blob_path(digest).unlink(missing_ok=True)
