"""Bundles and results travel as tar streams made while they are sent and unpacked while they arrive (issue
27, item 3): no archive on disk or whole in memory on either side. Attacked as a hostile host or API would
send them: links, climbing names, more members or bytes than allowed (declared or not), an endless stream; a
refused archive leaves nothing behind. Next to each refusal, an ordinary archive passes."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.fleet import transfer
from tests.support.fleet import unpack_in_shared_executor


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data" / "deep").mkdir(parents=True)
    (src / "manifest.json").write_text('{"files": 2}')
    (src / "data" / "deals.csv").write_bytes(os.urandom(300_000))  # several chunks, not a block multiple
    (src / "data" / "deep" / "empty.txt").write_bytes(b"")
    (src / "data" / "link").symlink_to(src / "manifest.json")  # never sent
    return src


def _archive(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


async def _chunks(data: bytes, size: int = 7_000) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]
        await asyncio.sleep(0)


def test_a_directory_travels_as_chunks_and_arrives_as_it_was(tmp_path: Path) -> None:
    src = _source(tmp_path)
    chunks = list(transfer.tar_chunks(transfer.directory_entries(src)))
    assert max(len(c) for c in chunks) <= transfer.CHUNK  # never the whole archive, nor a whole file, at once
    data = b"".join(chunks)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:  # a plain tar any reader takes
        assert sorted(tar.getnames()) == ["data/deals.csv", "data/deep/empty.txt", "manifest.json"]
    (tmp_path / "a.tar").write_bytes(data)
    names = transfer.unpack(tmp_path / "a.tar", tmp_path / "out", max_members=10, max_bytes=1_000_000)
    assert sorted(names) == ["data/deals.csv", "data/deep/empty.txt", "manifest.json"]
    expected = {k: v for k, v in _tree(src).items() if k != "data/link"}
    assert _tree(tmp_path / "out") == expected
    assert not (tmp_path / "out" / "data" / "link").exists()


async def test_an_archive_is_unpacked_while_it_arrives(tmp_path: Path) -> None:
    src = _source(tmp_path)
    data = b"".join(transfer.tar_chunks(transfer.directory_entries(src)))
    pulled: list[int] = []

    async def arriving() -> AsyncIterator[bytes]:
        async for chunk in _chunks(data):
            pulled.append(len(chunk))
            yield chunk

    await transfer.unpack_async(arriving(), tmp_path / "out", max_members=10, max_bytes=1_000_000)
    assert len(pulled) > 40 and sum(pulled) == len(data)  # taken chunk by chunk, not as one body
    assert _tree(tmp_path / "out")["data/deals.csv"] == (src / "data" / "deals.csv").read_bytes()


async def test_a_result_streamed_from_a_worker_reads_back_the_same(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "total.csv").write_text("region,amount\nnorth,5\n")
    (out / "chart.png").write_bytes(os.urandom(200_000))
    entries = transfer.result_entries(b'{"status": "succeeded"}', out, ["total.csv", "chart.png", "gone.txt"])
    body = transfer.async_chunks(transfer.tar_chunks(entries))
    await transfer.unpack_async(body, tmp_path / "in", max_members=10, max_bytes=1_000_000)
    got = _tree(tmp_path / "in")
    assert got[transfer.RESULT_JSON] == b'{"status": "succeeded"}'
    assert got["files/chart.png"] == (out / "chart.png").read_bytes()
    assert sorted(got) == [
        "files/chart.png",
        "files/total.csv",
        "result.json",
    ]  # a listed file missing: left out


@pytest.mark.parametrize(
    ("attack", "error"),
    [
        ("symlink", "only regular files"),
        ("hardlink", "only regular files"),
        ("device", "only regular files"),
        ("climbing", "unreadable archive"),
        ("members", "members allowed"),
        ("declared_bytes", "more than 1000 bytes"),
        ("endless", "the stream is longer"),
    ],
)
async def test_a_hostile_archive_is_refused_whole_and_leaves_nothing(
    tmp_path: Path, attack: str, error: str
) -> None:
    ok = _file("fine.txt", b"fine")
    link = tarfile.TarInfo("link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "fine.txt"
    dev = tarfile.TarInfo("dev")
    dev.type = tarfile.CHRTYPE
    archives = {
        "symlink": [ok, (link, None)],
        "hardlink": [ok, (hard, None)],
        "device": [ok, (dev, None)],
        "climbing": [ok, _file("../escaped.txt", b"x")],
        "members": [ok] + [_file(f"f{i}.txt", b"x") for i in range(5)],
        "declared_bytes": [ok, _file("big.bin", b"x" * 2_000)],
    }
    if attack == "endless":  # one member whose PAX header alone is far longer than the stream may be
        info = tarfile.TarInfo("fine.txt")
        info.pax_headers = {"comment": "x" * 200_000}
        data = _archive([ok, (info, b"")])
    else:
        data = _archive(archives[attack])
    target = tmp_path / "in"
    with pytest.raises(transfer.TransferError, match=error):
        await transfer.unpack_async(_chunks(data), target, max_members=4, max_bytes=1_000)
    assert not target.exists()  # the member already written went with the refusal
    assert not (tmp_path / "escaped.txt").exists()
    # positive control: the same limits take an ordinary archive
    await transfer.unpack_async(_chunks(_archive([ok])), target, max_members=4, max_bytes=1_000)
    assert _tree(target) == {"fine.txt": b"fine"}


async def test_an_absolute_name_lands_inside_the_target_and_nowhere_else(tmp_path: Path) -> None:
    outside = tmp_path / "absolute.txt"
    data = _archive([_file(str(outside), b"x")])
    names = await transfer.unpack_async(_chunks(data), tmp_path / "in", max_members=4, max_bytes=1_000)
    assert not outside.exists()  # tarfile's data filter strips the leading "/"
    assert _tree(tmp_path / "in") == {str(outside).lstrip("/"): b"x"} and len(names) == 1


async def test_a_size_refusal_is_too_large_and_comes_before_the_bytes_are_written(tmp_path: Path) -> None:
    big = _archive([_file("big.bin", os.urandom(500_000))])
    pulled: list[int] = []

    async def arriving() -> AsyncIterator[bytes]:
        async for chunk in _chunks(big):
            pulled.append(len(chunk))
            yield chunk

    with pytest.raises(transfer.TooLarge):
        await transfer.unpack_async(arriving(), tmp_path / "in", max_members=4, max_bytes=1_000)
    assert sum(pulled) < 20_000  # refused on the member's header, not after reading its half megabyte


def test_a_file_that_shrinks_while_it_is_sent_fails_the_archive(tmp_path: Path) -> None:
    path = tmp_path / "growing.csv"
    path.write_bytes(b"x" * 200_000)
    chunks = transfer.tar_chunks([("growing.csv", path)])
    next(chunks)  # the header, with 200,000 bytes declared
    next(chunks)
    path.write_bytes(b"")  # truncated by someone else meanwhile
    with pytest.raises(transfer.TransferError, match="shrank"):
        list(chunks)


def test_a_link_is_never_followed_when_sending(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("not for the run")
    (tmp_path / "out").symlink_to(tmp_path / "secret")
    with pytest.raises(OSError):
        list(transfer.tar_chunks([("out", tmp_path / "out")]))


async def test_senders_that_stall_hold_no_thread_the_rest_of_the_process_needs(tmp_path: Path) -> None:
    """Hostile (or slow) hosts upload results that stop mid-stream, more of them than the loop's executor has
    threads: the rest of the process still gets its `to_thread` work done (bundles sent to other hosts,
    staging), and a sender that goes on later is unpacked in full. Control: the same unpack run in the
    executor, as it was, holds every executor thread and the other work waits."""
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=2)  # the shared pool, small as on a small machine
    loop.set_default_executor(executor)
    data = b"".join(transfer.tar_chunks([("result.json", b'{"status": "succeeded"}')]))
    go_on = asyncio.Event()

    async def stalling() -> AsyncIterator[bytes]:
        yield data[:700]
        await go_on.wait()  # the sender stops here
        yield data[700:]

    uploads = [
        asyncio.ensure_future(
            transfer.unpack_async(stalling(), tmp_path / f"in{i}", max_members=4, max_bytes=1_000)
        )
        for i in range(4)
    ]
    await asyncio.sleep(0.3)
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "other work"), 5) == "other work"
    go_on.set()
    for names in await asyncio.wait_for(asyncio.gather(*uploads), 10):
        assert names == ["result.json"]

    # control: the unpack in the shared executor (as before) starves it while the senders stall
    go_on.clear()

    held = [
        asyncio.ensure_future(
            unpack_in_shared_executor(stalling(), tmp_path / f"old{i}", max_members=4, max_bytes=1_000)
        )
        for i in range(2)
    ]
    await asyncio.sleep(0.3)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.to_thread(lambda: "other work"), 1)
    go_on.set()
    await asyncio.wait_for(asyncio.gather(*held), 10)
    executor.shutdown(wait=True)
