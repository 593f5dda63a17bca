"""A staged bundle on disk, with no database: where bundles live, its manifest's name, the hash an approval
binds to, the re-hash that checks it (`verify_bundle`) and its removal. The API stages bundles
(`staging/service.py`); a fleet host only checks and removes them, and loads nothing more than this."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from backend.hashing import sha256_file, sha256_json
from backend.settings import get_settings

MANIFEST = "manifest.json"


def bundle_root() -> Path:
    """Where the API stages bundles (one folder each)."""
    return get_settings().data_dir / "bundles"


def bundle_hash(files: list[dict[str, Any]]) -> str:
    """Covers every staged file's path and content hash; the manifest's own metadata is not part of it."""
    return sha256_json(sorted([f["path"], f["sha256"]] for f in files if "sha256" in f))


def remove_bundle(directory: str | Path | None) -> None:
    """Delete a staged bundle once its run has ended. What the approval bound (the manifest and its hashes)
    stays in the run's row and the audit trail; the staged versions were copied into its action items."""
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def verify_bundle(directory: Path, expected_sha256: str) -> str | None:
    """Re-hash a staged bundle from disk. None when intact, else what is wrong (the runner refuses to start)."""
    manifest_path = Path(directory) / MANIFEST
    if not manifest_path.is_file():
        return "the bundle has no manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        listed = {str(f["path"]) for f in manifest["files"]}
    except (ValueError, KeyError, TypeError):
        return "the bundle's manifest.json is unreadable"
    root = Path(directory)
    on_disk = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p != manifest_path}
    if on_disk != listed:
        return f"files differ from the manifest: extra {sorted(on_disk - listed)[:5]}, missing {sorted(listed - on_disk)[:5]}"
    actual = [{"path": rel, "sha256": sha256_file(Path(directory) / rel)} for rel in sorted(listed)]
    digest = bundle_hash(actual)
    if digest != expected_sha256:
        return f"bundle hash {digest[:12]}… differs from the approved {expected_sha256[:12]}…"
    return None
