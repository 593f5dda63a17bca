"""A first attempt is the root of its own attempts: its `root_run_id` is its own id, given by the one INSERT
that makes it (one statement, one round trip; it was an INSERT and then an UPDATE of root_run_id), on SQLite
and PostgreSQL alike. Many made at once each get their own id; a revision keeps its first attempt's root."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.runs.factory import create_run
from backend.runs.tables import Run, RunStatus
from backend.staging.service import StagedBundle
from backend.tenancy.tables import Company, User
from tests.support.queries import counted
from tests.support.runs import proposal


def _writes_of_run(queries: list[str]) -> list[str]:
    return [q for q in queries if q.lstrip().startswith(("INSERT", "UPDATE", "WITH")) and '"run"' in q]


async def test_a_first_attempt_is_its_own_root_made_by_one_statement(
    client, alice, acme_on, monkeypatch
) -> None:
    with counted(monkeypatch) as queries:
        r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 201, r.text
    first = r.json()["id"]
    (write,) = _writes_of_run(queries)  # the INSERT, and no UPDATE of root_run_id after it
    assert 'UPDATE "run"' not in write and 'INSERT INTO "run"' in write
    row = await Run.select(Run.id, Run.root_run_id, Run.status).where(Run.id == first).first()
    assert row == {"id": first, "root_run_id": first, "status": RunStatus.awaiting_approval}
    await Run.update({Run.status: RunStatus.failed}).where(Run.id == first)
    r = await client.post(f"/api/runs/{first}/revisions", json={"code": "print(2)\n"}, headers=alice)
    assert r.status_code == 201, r.text
    second = await Run.select(Run.id, Run.root_run_id).where(Run.id == r.json()["id"]).first()
    assert second["id"] != first and second["root_run_id"] == first


async def test_first_attempts_made_at_once_each_get_their_own_id_as_their_root(
    demo_db, tmp_path: Path
) -> None:
    company = await Company.select(Company.id).first()
    user = await User.select(User.id).where(User.company == company["id"]).first()
    assert company is not None and user is not None
    before = await Run.count()

    async def one(k: int) -> Run:
        bundle = StagedBundle(
            directory=tmp_path / str(k), manifest={"bundle_sha256": f"{k:064x}"}, findings=[]
        )
        return await create_run(
            company_id=company["id"],
            requested_by=user["id"],
            conversation_id=f"c{k}",
            title=f"run {k}",
            plan="",
            code=f"print({k})",
            datasets=[],
            file_ids=[],
            limits={"wall_seconds": 60, "memory_mib": 512, "vcpus": 1},
            bundle=bundle,
            findings=[],
        )

    made = await asyncio.gather(*(one(k) for k in range(12)))
    ids = [run.id for run in made]
    assert len(set(ids)) == 12 and all(isinstance(i, int) for i in ids)
    assert all(run.root_run_id == run.id for run in made)  # the instance says what the row holds
    rows = await Run.select(Run.id, Run.root_run_id, Run.title).where(Run.id.is_in(ids))
    assert sorted((r["id"], r["root_run_id"]) for r in rows) == sorted((i, i) for i in ids)
    assert {r["title"] for r in rows} == {f"run {k}" for k in range(12)}
    assert await Run.count() == before + 12
