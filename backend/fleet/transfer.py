"""Bundles and results between the API and a worker travel as plain tar streams; unpacking refuses links,
devices, absolute or climbing names (tarfile's `data` filter) and bounds the members and their bytes."""

from __future__ import annotations

import tarfile
from pathlib import Path

RESULT_JSON = "result.json"
FILES = "files"


class TransferError(ValueError):
    pass


def pack(source: Path, target: Path, *, arcname: str = ".") -> None:
    """Every regular file under `source` into the tar `target` (names relative to `source`)."""
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(Path(arcname) / path.relative_to(source)), recursive=False)


def pack_result(result_json: bytes, out_dir: Path, names: list[str], target: Path) -> None:
    """A worker's result: `result.json` and the output files the result lists, under `files/`."""
    staging = target.with_suffix(".json")
    staging.write_bytes(result_json)
    try:
        with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(staging, arcname=RESULT_JSON, recursive=False)
            for name in names:
                path = out_dir / name
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=f"{FILES}/{name}", recursive=False)
    finally:
        staging.unlink(missing_ok=True)


def unpack(archive: Path, target: Path, *, max_members: int, max_bytes: int) -> list[str]:
    """Regular files and directories only, inside `target`; more members or bytes than allowed refuse the
    whole archive. Returns the files' relative names."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:") as tar:
            members = tar.getmembers()
            files = [m for m in members if m.isfile()]
            if len(members) > max_members:
                raise TransferError(f"{len(members)} members, more than the {max_members} allowed")
            if sum(m.size for m in files) > max_bytes:
                raise TransferError(f"more than {max_bytes} bytes")
            if any(not (m.isfile() or m.isdir()) for m in members):
                raise TransferError("only regular files and folders may travel")
            tar.extractall(target, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise TransferError(f"unreadable archive: {exc}") from exc
    return [m.name for m in files]
