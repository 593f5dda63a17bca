"""Staging: the exact bundle a run gets. Exports through the records' visibility rule, Drive files converted
to text, a manifest whose `bundle_sha256` is what an approval binds to, and injection findings.

The bundle's layout is known here and in `bundle.py` (no database: its hash, `verify_bundle` re-hashing it,
its removal), and nowhere else; `staged_versions` reads back the version of every staged record (what
accepting a proposed change compares against)."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend import filemodes
from backend.convert import Converted, cells_for_scan, convert, convert_isolated, text_for_scan
from backend.drive import service as drive
from backend.errors import Forbidden, Invalid
from backend.hashing import sha256_bytes
from backend.injection import Finding, scan_table, scan_text, verdicts
from backend.records.export import DatasetExport, VisibleRows, visible_rows
from backend.records.visibility import get_dataset
from backend.settings import get_settings
from backend.staging.bundle import MANIFEST, bundle_hash
from backend.staging.export import scan_export
from backend.staging.verdict_store import DbVerdictCache
from backend.tenancy.context import UserContext

README = "README.txt"
VERSIONS = "record_versions.json"  # {"schema": 1, "datasets": {name: [[id, version], ...]}}, id order
_STEM_BAD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class StagedBundle:
    directory: Path
    manifest: dict[str, Any]
    findings: list[Finding]

    @property
    def bundle_sha256(self) -> str:
        return self.manifest["bundle_sha256"]


async def check_datasets(ctx: UserContext, datasets: list[str]) -> list[str]:
    """Unknown names → 404 listing the valid ones; any dataset without permission → 403 naming each, with why.
    A company-defined dataset is known only within its own company."""
    names = list(dict.fromkeys(d.strip() for d in datasets if d.strip()))
    for name in names:
        await get_dataset(ctx.company_id, name)
    refused = [
        {"dataset": n, "reason": f"{ctx.email} holds no permission set granting read access to {n}"}
        for n in names
        if not ctx.can(n)
    ]
    if refused:
        raise Forbidden(
            {
                "message": "some requested datasets are not permitted: "
                + ", ".join(r["dataset"] for r in refused),
                "refused": refused,
            },
            code="dataset_forbidden",
        )
    return names


def _stem(name: str, taken: set[str]) -> str:
    base = _STEM_BAD.sub("-", name.rsplit(".", 1)[0]).strip("-._").lower() or "file"
    stem, n = base[:60], 2
    while stem in taken:
        stem, n = f"{base[:56]}-{n}", n + 1
    taken.add(stem)
    return stem


def _write(root: Path, rel: str, data: bytes) -> dict[str, Any]:
    """One bundle file, 0600 in 0700 folders: a bundle is company data (backend/filemodes.py)."""
    path = root / rel
    filemodes.ensure_dirs(path.parent)
    filemodes.write_private(path, data)
    return {"path": rel, "bytes": len(data), "sha256": sha256_bytes(data)}


def _write_export(
    root: Path, rel: str, rows: VisibleRows, company_id: int
) -> tuple[DatasetExport, dict[str, Any], list[Finding]]:
    """A dataset's export built, written and scanned in one thread hop: under load each hop waits for a
    thread and then for the event loop again, and these were three of a proposal's ten."""
    export = rows.export()
    entry = _write(root, rel, export.csv)
    return export, entry, scan_export(export, path=rel, sha256=entry["sha256"], company_id=company_id)


def _finish(root: Path, manifest: dict[str, Any], versions: bytes | None, findings: int) -> None:
    """The bundle's last files in one thread hop: the record versions (when datasets were staged), the
    README (which lists the files before it) and the manifest, which binds them all by `bundle_sha256`."""
    files = manifest["files"]
    if versions is not None:
        entry = _write(root, VERSIONS, versions)
        entry.update(source={"type": "cleanroom"}, kind="record_versions")
        files.append(entry)
    readme = _write(root, README, _readme(manifest))
    readme.update(source={"type": "cleanroom"}, kind="readme")
    files.append(readme)
    manifest["findings_count"] = findings  # the same count the approval screen lists
    manifest["bundle_sha256"] = bundle_hash(files)
    filemodes.write_private(root / MANIFEST, json.dumps(manifest, indent=2, default=str).encode())


def scan_converted(converted: Converted, display: str) -> list[Finding]:
    """Every cell, header, sheet name, formula and text line of one converted file."""
    findings: list[Finding] = []
    for sheet, header, rows in cells_for_scan(converted):
        findings += scan_table(header, rows, path=display, sheet=sheet)
    text = text_for_scan(converted)
    if text:
        findings += scan_text(text, path=display)
    return findings


def scan_files(files: list[tuple[str, bytes]]) -> tuple[list[Finding], list[dict[str, str]]]:
    """`cleanroom scan`: findings per file, and the files that could not be converted."""
    findings: list[Finding] = []
    errors: list[dict[str, str]] = []
    for path, data in files:
        converted = convert(data, path)
        if converted.error:
            errors.append({"path": path, "error": converted.error})
            continue
        try:
            findings += scan_converted(converted, path)
        except Exception as exc:  # a scanner bug on one file is that file's error, not a failed scan
            errors.append({"path": path, "error": f"injection scan failed: {type(exc).__name__}: {exc}"})
    return _dedupe(findings), errors


def _readme(manifest: dict[str, Any]) -> bytes:
    lines = [
        "This folder is the input of one Cleanroom run. It is read-only.",
        # No time here: the README is hashed, and identical inputs must give an identical bundle_sha256.
        f"Staged for {manifest['requested_by']}; manifest.json has the time and every file's sha256.",
        "",
    ]
    for entry in manifest["files"]:
        src = entry["source"]
        if entry["kind"] == "record_versions":
            line = f"- {entry['path']}: the version of every staged record, per dataset (id, version)"
        elif src["type"] == "dataset":
            line = f"- {entry['path']}: {entry['rows']} rows of {src['dataset']}"
            if entry["truncated"]:
                line += (
                    f". TRUNCATED: you can see {entry['visible_total']} rows, only the first {entry['rows']} "
                    "(oldest first) are included"
                )
        else:
            line = (
                f"- {entry['path']}: {entry['kind']} from Drive file '{src['name']}' ({entry['bytes']} bytes)"
            )
            if entry.get("truncated"):
                line += ", TRUNCATED by the conversion limits"
        lines.append(line)
    for err in manifest["errors"]:
        lines.append(f"- NOT STAGED: Drive file '{err['name']}': {err['error']}")
    lines.append("")
    lines.append("manifest.json lists every file with its sha256.")
    return ("\n".join(lines) + "\n").encode()


async def stage(
    ctx: UserContext,
    datasets: list[str],
    file_ids: list[int],
    out_dir: Path,
    *,
    row_cap: int | None = None,
    allow_empty: bool = False,
) -> StagedBundle:
    """`allow_empty`: a flow's later step may work only on what earlier steps handed on."""
    cap = row_cap or get_settings().export_row_cap
    names = await check_datasets(ctx, datasets)
    file_rows = [await drive.get_file(ctx, fid) for fid in dict.fromkeys(file_ids)]
    if not names and not file_rows and not allow_empty:
        raise Invalid("nothing to stage: name at least one dataset or Drive file")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise Invalid(f"{out_dir} is not empty; staging writes into an empty folder")
    filemodes.private_dir(out_dir.parent)
    filemodes.private_dir(out_dir)
    try:
        return await _stage_into(ctx, names, file_rows, out_dir, cap)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise


async def _stage_into(
    ctx: UserContext, names: list[str], file_rows: list[dict[str, Any]], out: Path, cap: int
) -> StagedBundle:
    """Every blocking step - exports, conversions, scans, writing and hashing files - runs in a thread: a
    proposal staging 50 files of 100 MB never holds the event loop. The scans read and fill the company's
    verdict cache (backend/staging/verdict_store.py); the manifest's `scan` says what they found in it."""
    with verdicts.using(DbVerdictCache(ctx.company_id)) as tally:
        return await _stage_with_cache(ctx, names, file_rows, out, cap, tally)


async def _stage_with_cache(
    ctx: UserContext,
    names: list[str],
    file_rows: list[dict[str, Any]],
    out: Path,
    cap: int,
    tally: verdicts.Tally,
) -> StagedBundle:
    files: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    findings: list[Finding] = []

    exports: list[DatasetExport] = []
    for name in names:
        rel = f"datasets/{name}.csv"
        rows = await visible_rows(ctx, name, cap)
        export, entry, found = await asyncio.to_thread(_write_export, out, rel, rows, ctx.company_id)
        entry.update(
            source={"type": "dataset", "dataset": name},
            kind="export",
            rows=export.rows,
            visible_total=export.visible_total,
            truncated=export.truncated,
        )
        files.append(entry)
        findings += found
        exports.append(export)

    taken: set[str] = set()
    for row in file_rows:
        data = await asyncio.to_thread(drive.blobs.get, row["sha256"])
        # a child process with hard time and memory ceilings: the file is untrusted
        converted = await asyncio.to_thread(convert_isolated, data, row["name"])
        source = {
            "type": "drive_file",
            "drive_file_id": row["id"],
            "name": row["name"],
            "sha256": row["sha256"],
        }
        if converted.error:
            errors.append(
                {
                    "drive_file_id": row["id"],
                    "name": row["name"],
                    "kind": converted.kind,
                    "error": converted.error,
                }
            )
            continue
        stem = _stem(row["name"], taken)
        # what the converter could not do or read (a misnamed file, replaced bytes, workbook parts it did not
        # scan): the person sees each next to the manifest before approving
        warnings += [
            {"drive_file_id": row["id"], "name": row["name"], "warning": w} for w in converted.warnings
        ]
        for fname, content, meta in converted.bundle_files(stem):
            entry = await asyncio.to_thread(_write, out, f"files/{stem}/{fname}", content)
            entry.update(
                source=source,
                kind=meta.get("kind", converted.kind),
                **{
                    k: meta[k]
                    for k in ("sheet", "hidden", "rows", "total_rows", "truncated", "pages")
                    if k in meta
                },
            )
            files.append(entry)
        if converted.keep_original and not any(t.truncated for t in converted.tables):
            entry = await asyncio.to_thread(_write, out, f"files/{stem}/original/{row['name']}", data)
            entry.update(source=source, kind="original")
            files.append(entry)
        elif (
            converted.keep_original
        ):  # rows past the limits were not scanned: the original must not slip them in
            warnings.append(
                {
                    "drive_file_id": row["id"],
                    "name": row["name"],
                    "warning": "the original was not staged because its text form was cut at the conversion limits",
                }
            )
        try:
            findings += await asyncio.to_thread(scan_converted, converted, row["name"])
        except Exception as exc:  # one file's scanner error is a manifest error, not a failed staging
            errors.append(
                {
                    "drive_file_id": row["id"],
                    "name": row["name"],
                    "kind": converted.kind,
                    "error": f"injection scan failed: {type(exc).__name__}: {exc}",
                }
            )

    versions = None
    if exports:
        by_name = {e.dataset.name: sorted(e.versions.items()) for e in exports}
        versions = json.dumps({"schema": 1, "datasets": by_name}, separators=(",", ":")).encode()
    manifest: dict[str, Any] = {
        "schema": 1,
        "requested_by": ctx.email,
        "company_id": ctx.company_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "row_cap": cap,
        "files": files,
        "errors": errors,
        "warnings": warnings,
        "scan": tally.summary(),
    }
    findings = _dedupe(findings)
    await asyncio.to_thread(_finish, out, manifest, versions, len(findings))
    return StagedBundle(out, manifest, findings)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for f in findings:
        key = (f.path, f.sheet, f.row, f.column, f.category)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def staged_versions(directory: str | Path, dataset: str) -> dict[int, int]:
    """Record id -> version of every row of `dataset` staged into the bundle (empty when none was)."""
    root = Path(directory)
    try:
        recorded = json.loads((root / VERSIONS).read_text())["datasets"]
    except FileNotFoundError:
        return _versions_from_csv(root, dataset)
    return {int(record_id): int(version) for record_id, version in recorded.get(dataset, [])}


def _versions_from_csv(root: Path, dataset: str) -> dict[int, int]:
    """Bundles staged before record_versions.json existed: the export's own id and version columns."""
    path = root / "datasets" / f"{dataset}.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {int(r["id"]): int(r["version"]) for r in csv.DictReader(fh)}
