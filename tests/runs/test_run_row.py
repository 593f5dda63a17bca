"""A run's whole row is read with SQL composed once (`rows.whole_run`: a run's detail, the worker's claim and
result, an approval), not Piccolo's select built anew at every request: the row must equal what that select
returns, column by column and type by type, on SQLite and PostgreSQL alike, for a run just proposed and for
one that ran (timestamps, JSON, numbers set). And a detail stays the company's: another company asking for
the same id gets 404, where the requester gets the run."""

from __future__ import annotations

import pytest

from backend import clock
from backend.errors import NotFound
from backend.runs import read
from backend.runs.rows import whole_run
from backend.runs.tables import Run, RunStatus
from backend.tenancy.context import load_user_context_by_email
from tests.support.runs import proposal


async def _piccolo_row(run_id: int, company_id: int) -> dict:
    return (
        await Run.select()
        .where((Run.id == run_id) & (Run.company == company_id))
        .output(load_json=True)
        .first()
    )


def _typed(row: dict) -> dict:
    return {name: (type(value).__name__, value) for name, value in row.items()}


async def test_the_run_row_equals_piccolos_select_and_stays_the_companys(client, alice, acme_on) -> None:
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 201, r.text
    run_id = r.json()["id"]
    ctx = await load_user_context_by_email("alice@acme.example")

    proposed = await read.get_run_row(ctx, run_id)
    assert _typed(proposed) == _typed(await _piccolo_row(run_id, ctx.company_id))
    assert _typed(await whole_run(run_id)) == _typed(proposed)
    assert isinstance(proposed["manifest"], dict) and proposed["status"] == RunStatus.awaiting_approval

    now = clock.now()
    await Run.update(
        {
            Run.status: RunStatus.succeeded,
            Run.started_at: now,
            Run.finished_at: now,
            Run.result: {"stdout": "ok\n", "exit_code": 0, "files": [{"name": "a.csv", "bytes": 3}]},
            Run.conclusion: {"summary": "done"},
            Run.credits_charged: 0.25,
        }
    ).where(Run.id == run_id)
    ran = await read.get_run_row(ctx, run_id)
    assert _typed(ran) == _typed(await _piccolo_row(run_id, ctx.company_id))
    assert _typed(await whole_run(run_id)) == _typed(ran)
    assert ran["result"]["files"][0]["name"] == "a.csv" and ran["credits_charged"] == 0.25

    other = await load_user_context_by_email("admin@globex.example")  # another company's admin
    assert other.company_id != ctx.company_id and other.sees_company_history
    with pytest.raises(NotFound):
        await read.get_run_row(other, run_id)
    assert await whole_run(run_id, company_id=other.company_id) is None
    assert await whole_run(10**9) is None
