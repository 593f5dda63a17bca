"""The two per-run disks, host side. Mirrors the agent's format (vm_templates/image/cleanroom-agent).

Job disk (read-only for the guest): block 0 = JOB_MAGIC, json length, payload length, sha256
of json+payload; json from BLOCK, payload (input files) right after it.
Output disk (written by the guest, trusted for nothing): block 0 = WARM/READY record;
block 1 = RESULT_MAGIC, json length, payload length, sha256; json at 2*BLOCK (at most
RESULT_JSON_MAX); payload (stdout, stderr, actions, files) at RESULT_PAYLOAD_OFFSET.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK = 4096
JOB_MAGIC = b"CLEANROOM-JOB-1\n"
WARM_MAGIC = b"CLEANROOM-WRM-1\n"
READY_MAGIC = b"CLEANROOM-RDY-1\n"
RESULT_MAGIC = b"CLEANROOM-RES-1\n"
RESULT_HEADER_OFFSET = BLOCK
RESULT_JSON_OFFSET = 2 * BLOCK
RESULT_JSON_MAX = 1024 * 1024
RESULT_PAYLOAD_OFFSET = RESULT_JSON_OFFSET + RESULT_JSON_MAX


class WireError(Exception):
    """The guest wrote something that does not parse: never trusted, reported as an error."""


def output_disk_bytes(stdout_cap: int, max_files_bytes: int, max_actions_bytes: int) -> int:
    need = RESULT_PAYLOAD_OFFSET + 2 * stdout_cap + max_files_bytes + max_actions_bytes + 4 * 1024 * 1024
    mib = 1024 * 1024
    return -(-need // mib) * mib


def input_files(input_dir: Path | None) -> list[tuple[str, Path]]:
    """(relative name, path) of every regular file under `input_dir`, symlinks skipped."""
    if input_dir is None:
        return []
    inputs = []
    for path in sorted(Path(input_dir).rglob("*")):
        if path.is_symlink():
            continue
        if path.is_file():
            inputs.append((path.relative_to(input_dir).as_posix(), path))
    return inputs


def write_job_disk(
    path: Path,
    size: int,
    job: dict[str, Any],
    inputs: list[tuple[str, Path]],
    *,
    carried: list[tuple[str, Path]] | None = None,
    in_place: bool = False,
) -> None:
    """Write the job disk: the job record plus every input file's bytes; the header goes last.

    `inputs` become /work/input in the guest, `carried` (what earlier steps of a flow handed on) /work/flow.
    `in_place` fills the disk of an already running (standby) guest without truncating it.
    """
    offset = 0
    lists: dict[str, list[dict[str, Any]]] = {"inputs": [], "carried": []}
    files = [("inputs", name, source) for name, source in inputs]
    files += [("carried", name, source) for name, source in carried or []]
    for key, name, source in files:
        length = source.stat().st_size
        lists[key].append({"name": name, "offset": offset, "size": length})
        offset += length
    body = json.dumps({**job, **lists}).encode()
    if BLOCK + len(body) + offset > size:
        raise ValueError(f"job too large for the {size // (1024 * 1024)} MiB job disk")
    digest = hashlib.sha256(body)
    with open(path, "r+b" if in_place else "wb") as fh:
        if not in_place:
            fh.truncate(size)
        fh.seek(BLOCK)
        fh.write(body)
        for _key, _name, source in files:
            with open(source, "rb") as src:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    fh.write(chunk)
        fh.flush()  # body before header: a polling guest never sees a header without its body
        fh.seek(0)
        fh.write(JOB_MAGIC + struct.pack(">QQ", len(body), offset) + digest.digest())


def create_output_disk(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


def read_block0(path: Path, magic: bytes) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            block = fh.read(BLOCK)
    except OSError:
        return None
    if not block.startswith(magic):
        return None
    (length,) = struct.unpack(">Q", block[16:24])
    try:
        return json.loads(block[24 : 24 + min(length, BLOCK - 24)])
    except ValueError:
        return None


@dataclass
class GuestResult:
    record: dict[str, Any]
    payload_offset: int
    payload_len: int
    path: Path

    def blob(self, index: int, limit: int) -> bytes:
        """Read blob `index` with bounds checked against the payload and `limit`."""
        try:
            layout = self.record["blobs"][index]
            offset, size = int(layout["offset"]), int(layout["size"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise WireError(f"blob {index} missing") from exc
        if offset < 0 or size < 0 or offset + size > self.payload_len or size > limit:
            raise WireError(f"blob {index} out of bounds")
        with open(self.path, "rb") as fh:
            fh.seek(self.payload_offset + offset)
            return fh.read(size)


# What the host spends hashing one run's result area: a header is hashed once (the guest writes it last,
# after the payload and an fsync, so a digest that fails stays failed until the header changes), and at most
# this many headers or bytes per run; a guest that keeps rewriting forged headers is a protocol error.
MAX_RESULT_HASHES = 8
MAX_RESULT_HASH_BYTES = 256 * 1024 * 1024


class ResultReader:
    """Reads one run's output disk, hashing bounded per run.

    The RESULT header (magic, lengths, digest) is the generation: a header already hashed without a match
    is not hashed again (a torn read ends with a new header; a forged one never matches); a new header is
    hashed while the run's budget lasts (`MAX_RESULT_HASHES` headers, `MAX_RESULT_HASH_BYTES` bytes),
    after which a further new header raises WireError.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hashes = 0
        self.hashed_bytes = 0
        self._failed: bytes | None = None  # the last header hashed without a match

    def poll(self) -> tuple[GuestResult | None, bool]:
        """(result, False) when complete; (None, True) while the header's digest does not match; (None,
        False) while there is no header."""
        try:
            disk_size = os.path.getsize(self.path)
            with open(self.path, "rb") as fh:
                fh.seek(RESULT_HEADER_OFFSET)
                header = fh.read(64)
                if not header.startswith(RESULT_MAGIC) or len(header) < 64:
                    return None, False
                if header == self._failed:
                    return None, True  # the same generation: its digest failed already
                json_len, payload_len = struct.unpack(">QQ", header[16:32])
                if json_len > RESULT_JSON_MAX or RESULT_PAYLOAD_OFFSET + payload_len > disk_size:
                    raise WireError("result lengths out of bounds")
                self._spend(json_len + payload_len)
                fh.seek(RESULT_JSON_OFFSET)
                body = fh.read(json_len)
                digest = hashlib.sha256(body)
                fh.seek(RESULT_PAYLOAD_OFFSET)
                remaining = payload_len
                while remaining:
                    chunk = fh.read(min(remaining, 1 << 20))
                    if not chunk:
                        break
                    digest.update(chunk)
                    remaining -= len(chunk)
        except OSError:
            return None, False
        if remaining or digest.digest() != header[32:64]:
            self._failed = header
            return None, True
        try:
            record = json.loads(body)
        except ValueError as exc:
            raise WireError("result record is not JSON") from exc
        if not isinstance(record, dict):
            raise WireError("result record is not an object")
        return GuestResult(
            record=record, payload_offset=RESULT_PAYLOAD_OFFSET, payload_len=payload_len, path=self.path
        ), False

    def _spend(self, size: int) -> None:
        if self.hashes >= MAX_RESULT_HASHES or self.hashed_bytes + size > MAX_RESULT_HASH_BYTES:
            raise WireError(
                f"the guest rewrote its result header {self.hashes} times without a matching digest "
                f"({self.hashed_bytes:,} bytes hashed): protocol error"
            )
        self.hashes += 1
        self.hashed_bytes += size


def read_result(path: Path) -> GuestResult | None:
    """The complete result record, or None while it is absent or incomplete (hash mismatch)."""
    return poll_result(path)[0]


def poll_result(path: Path) -> tuple[GuestResult | None, bool]:
    """`read_result`, plus whether a RESULT header was there but its digest did not match.

    One look, with a budget of its own: a run's wait keeps one `ResultReader` for all its polls, so a header
    is not hashed again until it changes, within the run's budget.
    """
    return ResultReader(path).poll()
