"""Runs written before the reshape keep what they meant: who approved them (now a kind, not a prefix of
`approved_by`), how many action items they proposed, and the title on their credit charge."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend import db
from backend.credits.tables import CreditCharge
from backend.runs.tables import Run
from tests.support.databases import POSTGRES_URL, _admin_sql, _with_db
from tests.support.migrations import T0, _acme_and_alice, _migrate, _sql

BEFORE = "2026-11-30T21:40:00:000000"  # the last migration before the reshape
RUN_COLUMNS = (
    "company, requested_by, conversation_id, title, plan, code, code_sha256, datasets, file_ids, limits, "
    "status, attempt, bundle_dir, bundle_sha256, manifest, findings, created_at, updated_at, approved_by, "
    "approved_at, followup_grant_max_runs, followup_grant_used, read_actions, actions_discarded"
)


@pytest.fixture
async def bare(engine: str, tmp_path: Path) -> AsyncIterator[str]:
    """A database with no schema at all, on the engine under test."""
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'bare.sqlite3'}"
        return
    name = f"t_bare_{uuid.uuid4().hex[:10]}"
    await _admin_sql(f'CREATE DATABASE "{name}"')
    yield _with_db(POSTGRES_URL or "", name)
    await _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_runs_approved_before_the_reshape_keep_who_approved_them(bare: str) -> None:
    db.configure(bare)
    await _migrate(BEFORE)
    await _acme_and_alice()
    approvers = ["alice@acme.example", "followup:1", "schedule:7", None]
    for by in approvers:
        await _sql(
            f"INSERT INTO run ({RUN_COLUMNS}) VALUES (1, 1, 'c', 'Pipeline', '', 'print(1)', 'h', '[]', '[]', "
            "{}, 'queued', 1, 'd', 'b', {}, '[]', {}, {}, {}, {}, 0, 0, true, false)",
            "{}",
            "{}",
            T0,
            T0,
            by,
            T0 if by else None,
        )
    await _sql(
        'INSERT INTO action_item (company, run, "index", op, dataset, changes, reason, raw, status) '
        "VALUES (1, 2, 0, '', '', {}, '', '', 'invalid')",
        "{}",
    )
    await _sql(
        'INSERT INTO credit_charge (company, "user", run_id, credits, vcpu_seconds, gib_seconds, at) '
        "VALUES (1, 1, 3, 1.5, 1.0, 1.0, {})",
        T0,
    )
    await db.create_schema()  # the rest of the migrations, as at start-up
    rows = await Run.select(Run.approved_by, Run.approval_kind, Run.action_items_count).order_by(Run.id)
    assert [(r["approved_by"], r["approval_kind"]) for r in rows] == [
        ("alice@acme.example", "person"),
        ("followup:1", "followup"),
        ("schedule:7", "schedule"),
        (None, None),  # never approved
    ]
    assert [r["action_items_count"] for r in rows] == [0, 1, 0, 0]
    assert await CreditCharge.select(CreditCharge.run_id, CreditCharge.run_title) == [
        {"run_id": 3, "run_title": "Pipeline"}
    ]


async def test_runs_made_before_staged_bytes_was_stored_get_what_their_manifest_lists(bare: str) -> None:
    """The limits on staged data sum `run.staged_bytes` in the database (issue 30); a run made before the
    column existed counts what its manifest lists, not zero, so a backlog from before an upgrade still
    holds against the limits."""
    from backend.runs import quotas

    db.configure(bare)
    await _migrate("2026-12-02T15:40:00:000000")  # the last migration before the column
    await _acme_and_alice()
    manifests = [
        {"files": [{"path": "a.csv", "bytes": 1200}, {"path": "b.txt", "bytes": 34}]},
        {"files": []},
        {"files": [{"path": "c.csv", "bytes": 5}, {"path": "bad", "bytes": "9"}]},
    ]
    for status, manifest in zip(("awaiting_approval", "succeeded", "queued"), manifests, strict=True):
        await _sql(
            f"INSERT INTO run ({RUN_COLUMNS}) VALUES (1, 1, 'c', 'Pipeline', '', 'print(1)', 'h', '[]', "
            "'[]', {}, {}, 1, 'd', 'b', {}, '[]', {}, {}, NULL, NULL, 0, 0, true, false)",
            "{}",
            status,
            json.dumps(manifest),
            T0,
            T0,
        )
    await db.create_schema()  # the rest of the migrations, as at start-up
    rows = await Run.select(Run.staged_bytes).order_by(Run.id)
    assert [r["staged_bytes"] for r in rows] == [1234, 0, 5]
    # what the limits see: the runs in flight (the first and the third), summed by the database
    assert await quotas.staged_in_flight(1) == 1239
    assert await quotas.staged_in_flight(1, user_id=1) == 1239
    assert await quotas.staged_in_flight(1, user_id=2) == 0
