"""Content-addressed blobs under the data directory: data_dir/blobs/ab/cdef…"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from backend import filemodes
from backend.hashing import sha256_bytes
from backend.settings import get_settings


def blob_path(digest: str) -> Path:
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError("not a sha256 hex digest")
    return get_settings().data_dir / "blobs" / digest[:2] / digest[2:]


def put(data: bytes) -> str:
    digest = sha256_bytes(data)
    path = blob_path(digest)
    if not path.exists():
        filemodes.private_dir(path.parent)  # blobs/ and blobs/ab/ 0700; mkstemp makes the file 0600
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    return digest


def get(digest: str) -> bytes:
    return blob_path(digest).read_bytes()
