"""`cleanroom records --as EMAIL DATASET --format json|csv` prints what the app shows that user; the CSV is
written by the same writer as a staged export, so the two cannot drift apart."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.records.export import visible_rows
from backend.tenancy.context import load_user_context_by_email

CLEANROOM = str(Path(sys.executable).parent / "cleanroom")


def records_cli(db_url: str, *args: str) -> str:
    r = subprocess.run(
        [CLEANROOM, "records", *args],
        env={**os.environ, "DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.sqlite
async def test_records_csv_and_json_agree_with_the_staged_export(demo_db: str) -> None:
    as_bob = ("--as", "bob@acme.example", "deals")
    rows = json.loads(records_cli(demo_db, *as_bob, "--format", "json"))
    text = records_cli(demo_db, *as_bob, "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["id"]) for r in parsed] == [r["id"] for r in rows] and rows
    export = (
        await visible_rows(await load_user_context_by_email("bob@acme.example"), "deals", 5000)
    ).export()
    assert not export.truncated and text.encode() == export.csv
