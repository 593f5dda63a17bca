"""`cleanroom serve --processes N` above 1 needs PostgreSQL: on SQLite it refuses before starting anything,
saying why (the two-process fleet on PostgreSQL is tests/fleet/test_api_processes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from backend.settings import REPO_ROOT


def test_more_than_one_api_process_on_sqlite_is_refused_with_the_reason(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")},
        "CLEANROOM_DATA_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cleanroom.sqlite3'}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "backend", "serve", "--no-console", "--processes", "2"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--processes above 1 needs PostgreSQL" in done.stderr
    assert not (tmp_path / "cleanroom.sqlite3").exists()  # refused before anything was made
