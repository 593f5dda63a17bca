"""Where the console keeps who is signed in: NiceGUI's per-browser storage, the service user's alone.

`app.storage.user` holds each signed-in person's API session (`console/session.py`); whoever reads it can
act as that person. NiceGUI persists it to `storage-user-<id>.json` in `NICEGUI_STORAGE_PATH` (default:
`.nicegui` in the working directory, which `scripts/run` makes the checkout, a folder other accounts must
pass), with the process's default modes. So the console keeps it in `console-storage` in the data
directory, 0700, and runs with umask 077, so every file in it is 0600 from creation. NiceGUI reads
`NICEGUI_STORAGE_PATH` once, when it is first imported: `prepare()` runs before that (`console/__main__.py`)
and nothing here imports it. Files an older console left in `./.nicegui` (live sessions, 0644) are removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from backend import filemodes
from backend.settings import Settings

STORAGE_DIR = "console-storage"  # in the data directory
UMASK = 0o077
LEGACY_DIR = Path(".nicegui")  # NiceGUI's default, relative to the working directory

log = logging.getLogger("cleanroom.console")


def storage_path(settings: Settings) -> Path:
    return settings.data_dir / STORAGE_DIR


def prepare(settings: Settings) -> Path:
    """Umask 077, the storage folder 0700 (its files 0600, tightened if an older version left them
    looser), NiceGUI pointed at it; then the sessions an older console left in `./.nicegui` go."""
    os.umask(UMASK)
    path = filemodes.private_dir(storage_path(settings))
    for item in path.iterdir():
        if item.is_file() and not item.is_symlink():
            item.chmod(filemodes.PRIVATE_FILE)
    os.environ["NICEGUI_STORAGE_PATH"] = str(path)
    remove_legacy(LEGACY_DIR.resolve(), keep=path)
    return path


def remove_legacy(folder: Path, *, keep: Path) -> int:
    """Deletes NiceGUI storage files (signed-in people's API sessions) from `folder`, unless it is `keep`;
    the folder goes too when that leaves it empty. Returns how many files went."""
    if folder == keep.resolve() or not folder.is_dir() or folder.is_symlink():
        return 0
    removed = 0
    for item in folder.glob("storage-*.json*"):
        if item.is_file() and not item.is_symlink():
            item.unlink(missing_ok=True)
            removed += 1
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty
    if removed:
        log.warning("removed %d console storage files left by an older version in %s", removed, folder)
    return removed
