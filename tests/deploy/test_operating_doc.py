"""docs/operating.md is what this test runs: every `bash step` block, in order, in one shell, on this machine,
with the paths moved to a temporary folder, a database of its own on the test cluster, and Caddy's local CA
instead of a public certificate. Between the backup and the restore it adds what a day's work would (a
company), so the restore is one from "yesterday's" backup: `audit verify` must say the database is behind its
anchor (exit 3), `audit restored` record it, and the next verify pass saying what was lost. The `bash host`
blocks (packages, users, systemd, DNS) cannot run here; they are checked with `bash -n`."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from backend.settings import REPO_ROOT
from tests.support.databases import POSTGRES_URL, _admin_sql

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DOC = REPO_ROOT / "docs" / "operating.md"
BLOCK = re.compile(r"^```bash (step|host)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
A_DAYS_WORK = 'cleanroom companies create "Written after the backup" --admin later@after.test\n'


def blocks(kind: str) -> list[str]:
    return [body for found, body in BLOCK.findall(DOC.read_text()) if found == kind]


def test_the_doc_marks_its_steps() -> None:
    steps = blocks("step")
    assert len(steps) >= 8 and blocks("host")
    joined = "".join(steps)
    for command in ("cleanroom migrate", "cleanroom backup", "cleanroom restore", "cleanroom audit restored"):
        assert command in joined


def test_the_host_blocks_are_valid_bash() -> None:
    for body in blocks("host"):
        done = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
        assert done.returncode == 0, f"{done.stderr}\n{body}"


def test_the_operating_doc_runs_from_an_empty_database_to_a_verified_restore(
    engine: str, tmp_path: Path
) -> None:
    if not (REPO_ROOT / ".venv" / "bin" / "cleanroom").exists():
        pytest.skip("no .venv in this checkout (scripts/setup makes it)")
    name = f"t_doc_{uuid.uuid4().hex[:10]}"
    script = ""
    for body in blocks("step"):
        if "cleanroom restore" in body:
            script += A_DAYS_WORK
        script += body
    admin_url = POSTGRES_URL or ""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CLEANROOM_", "PYTEST_"))},
        "DATABASE_URL": "",
        "CLEANROOM_CODE": str(REPO_ROOT),
        "CLEANROOM_ETC": str(tmp_path / "etc"),
        "CLEANROOM_HOME": str(tmp_path / "home"),
        "CLEANROOM_BACKUPS": str(tmp_path / "backups"),
        "CLEANROOM_DOMAIN": "cleanroom.test",
        "CLEANROOM_DB": name,
        "CLEANROOM_AS": "",
        "CLEANROOM_TLS": "internal",
        "CLEANROOM_CADDY_LOG": str(tmp_path / "caddy-access.log"),
        "CLEANROOM_PASSWORD_HASH_PROFILE": "cheap",
        "PG_ADMIN_URL": admin_url,
        "PG_HOSTPORT": admin_url.split("@", 1)[1].split("/", 1)[0],
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        asyncio.run(
            _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'DROP ROLE IF EXISTS "{name}"')
        )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "migrated to cleanroom" in out and "nothing to migrate" in out
    assert "Valid configuration" in out  # Caddy took the shipped Caddyfile
    assert "audit chain RESTORED, not recorded: the database is behind the anchor by" in out
    assert "recorded: restored on" in out and "were lost" in out
    assert re.search(r"audit chain OK: \d+ entries", out) and "note: restored on" in out
