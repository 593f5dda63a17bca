"""Bundles and results between the API and a worker travel as plain tar streams, made while they are sent and
unpacked while they arrive: no whole archive in memory and no second copy on disk. Unpacking refuses links,
devices, absolute or climbing names (tarfile's `data` filter) and bounds the members, their bytes and the
stream itself; a refused archive leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import tarfile
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path

RESULT_JSON = "result.json"
FILES = "files"
CHUNK = 64 * 1024
BLOCK = tarfile.BLOCKSIZE
# headers (PAX records included), padding and the end blocks on top of the members' own bytes
OVERHEAD_PER_MEMBER = 4 * BLOCK


class TransferError(ValueError):
    pass


class TooLarge(TransferError):
    """More members, bytes or stream than allowed."""


# --- sending -------------------------------------------------------------------------------------------


def _header(name: str, size: int, mtime: float) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(mtime), 0o644
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


def tar_chunks(entries: Iterable[tuple[str, Path | bytes]]) -> Iterator[bytes]:
    """A tar of `entries` (name in the archive, and a regular file or the bytes themselves), as chunks of at
    most CHUNK bytes made as they are read. A file is opened without following a link; one that changes size
    while it is read fails the archive rather than sending a member that disagrees with its header."""
    for name, source in entries:
        if isinstance(source, bytes):
            yield _header(name, len(source), 0)
            yield from (source[i : i + CHUNK] for i in range(0, len(source), CHUNK))
            yield _padding(len(source))
            continue
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            yield _header(name, st.st_size, st.st_mtime)
            left = st.st_size
            while left:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    raise TransferError(f"{name} shrank while it was sent")
                left -= len(chunk)
                yield chunk
            yield _padding(st.st_size)
    yield b"\0" * (2 * BLOCK)


def directory_entries(source: Path, *, arcname: str = ".") -> list[tuple[str, Path | bytes]]:
    """Every regular file under `source` (no link followed), named relative to it, in a stable order."""
    return [
        (str(Path(arcname) / path.relative_to(source)), path)
        for path in sorted(source.rglob("*"))
        if path.is_file() and not path.is_symlink()
    ]


def result_entries(result_json: bytes, out_dir: Path, names: list[str]) -> list[tuple[str, Path | bytes]]:
    """A worker's result: `result.json` and the output files the result lists, under `files/`."""
    entries: list[tuple[str, Path | bytes]] = [(RESULT_JSON, result_json)]
    for name in names:
        path = out_dir / name
        if path.is_file() and not path.is_symlink():
            entries.append((f"{FILES}/{name}", path))
    return entries


async def async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A chunk generator read off the event loop (its file reads block), for an HTTP body."""
    done = object()
    while (chunk := await asyncio.to_thread(next, chunks, done)) is not done:
        yield chunk  # type: ignore[misc]


def write(entries: Iterable[tuple[str, Path | bytes]], target: Path) -> None:
    """The same tar into a file (tests and tools; the API and the workers stream it)."""
    with target.open("wb") as fh:
        for chunk in tar_chunks(entries):
            fh.write(chunk)


def pack_result(result_json: bytes, out_dir: Path, names: list[str], target: Path) -> None:
    write(result_entries(result_json, out_dir, names), target)


# --- receiving -----------------------------------------------------------------------------------------


class _ChunkReader(io.RawIOBase):
    """A readable file over a source of chunks (`next_chunk` gives None at the end), counting what it read;
    more than `limit` bytes fails the read."""

    def __init__(self, next_chunk: Callable[[], bytes | None], limit: int) -> None:
        self._next, self._limit, self._read = next_chunk, limit, 0
        self._chunk, self._at = memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        while self._at >= len(self._chunk):
            chunk = self._next()
            if chunk is None:
                return 0
            self._read += len(chunk)
            if self._read > self._limit:
                raise TooLarge(f"the stream is longer than the {self._limit} bytes allowed")
            self._chunk, self._at = memoryview(chunk), 0
        n = min(len(buffer), len(self._chunk) - self._at)
        buffer[:n] = self._chunk[self._at : self._at + n]
        self._at += n
        return n


def _stream_limit(max_members: int, max_bytes: int) -> int:
    return max_bytes + max_members * OVERHEAD_PER_MEMBER + 20 * BLOCK


def unpack_stream(fileobj: io.RawIOBase, target: Path, *, max_members: int, max_bytes: int) -> list[str]:
    """Regular files and directories only, inside `target` (made here, and removed again if the archive is
    refused); more members or bytes than allowed refuse the whole archive, checked on each member's header
    before its bytes are written. Returns the files' relative names."""
    target.mkdir(parents=True, exist_ok=False)
    names: list[str] = []
    members = total = 0
    try:
        with tarfile.open(fileobj=io.BufferedReader(fileobj, CHUNK), mode="r|") as tar:
            for member in tar:
                members += 1
                if members > max_members:
                    raise TooLarge(f"more than the {max_members} members allowed")
                if not (member.isfile() or member.isdir()):
                    raise TransferError("only regular files and folders may travel")
                total += member.size if member.isfile() else 0
                if total > max_bytes:
                    raise TooLarge(f"more than {max_bytes} bytes")
                tar.extract(member, target, filter="data")
                if member.isfile():
                    names.append(member.name)
    except (tarfile.TarError, OSError, TransferError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        if isinstance(exc, TransferError):
            raise
        raise TransferError(f"unreadable archive: {exc}") from exc
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return names


def unpack(archive: Path, target: Path, *, max_members: int, max_bytes: int) -> list[str]:
    """An archive on disk, unpacked as a stream would be (tests and tools)."""
    with archive.open("rb") as fh:
        reader = _ChunkReader(lambda: fh.read(CHUNK) or None, _stream_limit(max_members, max_bytes))
        return unpack_stream(reader, target, max_members=max_members, max_bytes=max_bytes)


async def unpack_async(
    chunks: AsyncIterator[bytes], target: Path, *, max_members: int, max_bytes: int
) -> list[str]:
    """An archive arriving as an HTTP body, unpacked while it arrives by a thread of its own that asks the event
    loop for each next chunk. The stream itself is bounded (headers and padding on top of `max_bytes`).

    The thread waits on the network for as long as the sender takes, so it is never one of the loop's shared
    executor threads (six on two cores): six hosts uploading slowly would hold all of them, and every other
    `to_thread` of the process (bundles sent to other hosts, staging, files) would wait behind them."""
    loop = asyncio.get_running_loop()
    iterator = aiter(chunks)
    done: asyncio.Future[list[str]] = loop.create_future()

    def next_chunk() -> bytes | None:
        return asyncio.run_coroutine_threadsafe(anext(iterator, None), loop).result()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> None:
        try:
            reader = _ChunkReader(next_chunk, _stream_limit(max_members, max_bytes))
            names = unpack_stream(reader, target, max_members=max_members, max_bytes=max_bytes)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
            error = exc
            outcome = lambda: done.set_exception(error)  # noqa: E731
        else:
            outcome = lambda: done.set_result(names)  # noqa: E731
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="cleanroom-unpack", daemon=True).start()
    return await done
