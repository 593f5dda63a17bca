"""No overdraft: approving a run reserves its maximum cost against what is left of the pool, atomically.

Twenty approvals sent at once (a person signed in, each request held until all twenty have read their
run as waiting: the widest window between a check and the write that follows it) against a pool that
covers five: exactly five are queued, fifteen are told 402 with the reason, and the pool is never below
zero. Controls: a pool that covers all twenty queues all twenty; a run that ends is charged what it used
and gives back the rest of its reservation; a cancelled run gives back all of it. On SQLite and
PostgreSQL (the `engine` parameter of the database fixtures).
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest

from backend import execution, sandbox
from backend.credits import service as credits
from backend.errors import PaymentRequired
from backend.runs import service as runs
from backend.runs.tables import Run, RunStatus
from backend.sandbox.models import SandboxResult, Timings, VmInfo
from tests.support.concurrency import concurrent_client, meet_after
from tests.support.credits import LIMITS, MAX_COST, _acme, _pool_covering, _remaining
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal

ASKERS = ("alice@acme.example", "bob@acme.example")  # ten each: within the cap on runs awaiting approval


async def _propose(client: Any, count: int) -> list[dict[str, Any]]:
    proposed = []
    tokens = [await token_for(client, asker) for asker in ASKERS[:count]]  # one each, as an assistant holds
    for i in range(count):
        token = tokens[i % len(tokens)]
        r = await client.post("/api/runs", json=proposal(title=f"run {i}", limits=LIMITS), headers=token)
        assert r.status_code == 201, r.text
        proposed.append(r.json())
    return proposed


async def _approve_at_once(client: Any, proposed: list[dict[str, Any]], monkeypatch: Any) -> list[Any]:
    """The company admin approves every run at once, signed in (a session, as the console does)."""
    meet_after(monkeypatch, runs, "get_run_row", len(proposed))
    client.cookies.clear()
    await login(client, "admin@acme.example")
    async with concurrent_client(client) as person:
        return await asyncio.gather(
            *(
                person.post(
                    f"/api/runs/{run['id']}/approve",
                    json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
                )
                for run in proposed
            )
        )


async def test_twenty_approvals_at_once_against_a_pool_for_five_queue_five(client, monkeypatch) -> None:
    await enable_code()
    proposed = await _propose(client, 20)
    pool = await _pool_covering(5)
    answers = await _approve_at_once(client, proposed, monkeypatch)

    codes = [a.status_code for a in answers]
    assert codes.count(200) == 5 and codes.count(402) == 15, codes
    for refused in (a for a in answers if a.status_code == 402):
        body = refused.json()
        assert body["error"] == "credits_exhausted"
        assert f"cannot cover the maximum cost of this run, {MAX_COST:.2f} credits" in body["detail"]
        assert f"of {pool} credits are left" in body["detail"]
    ids = [run["id"] for run in proposed]
    rows = await Run.select(Run.status, Run.credits_reserved).where(Run.id.is_in(ids))
    queued = [r for r in rows if r["status"] == RunStatus.queued]
    assert len(queued) == 5 and all(r["credits_reserved"] == MAX_COST for r in queued)
    assert sum(r["status"] == RunStatus.awaiting_approval for r in rows) == 15
    assert all(r["credits_reserved"] == 0 for r in rows if r["status"] != RunStatus.queued)
    usage = await _remaining(client)
    assert usage["reserved"] == 5 * MAX_COST
    assert 0 <= usage["remaining"] < MAX_COST, usage
    _, _, left = await credits.balance(await _acme())
    assert left >= 0


async def test_control_the_point_read_of_before_lets_the_same_race_overdraw(client, monkeypatch) -> None:
    """Control: with the reservation replaced by the check it replaced (a point read of what was charged,
    nothing held), the same twenty approvals all land and their maximum cost is more than the pool holds:
    the test above would notice."""

    async def point_read(company_id: int, cost: float, *, what: str = "", **_: Any) -> None:
        if reason := await credits.blocked_reason(company_id, holds=False):
            raise PaymentRequired(reason)

    monkeypatch.setattr(credits, "reserve", point_read)
    await enable_code()
    proposed = await _propose(client, 20)
    await _pool_covering(5)
    answers = await _approve_at_once(client, proposed, monkeypatch)
    assert [a.status_code for a in answers] == [200] * 20
    assert (await _remaining(client))["remaining"] < 0


async def test_control_a_pool_for_twenty_queues_all_twenty(client, monkeypatch) -> None:
    await enable_code()
    proposed = await _propose(client, 20)
    await _pool_covering(20)
    answers = await _approve_at_once(client, proposed, monkeypatch)
    assert [a.status_code for a in answers] == [200] * 20, [a.text for a in answers if a.status_code != 200]
    assert (await _remaining(client))["reserved"] == 20 * MAX_COST


@pytest.fixture
def vm(monkeypatch) -> None:
    """The stand-in VM: a clean success after 10 seconds of wall time (well inside the 100 approved)."""

    def run_code(code: str, **_: Any) -> SandboxResult:
        return SandboxResult(
            status="succeeded",
            exit_code=0,
            stdout="ok\n",
            timings_ms=Timings(total=10_000),
            vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"]),
        )

    monkeypatch.setattr(sandbox, "run_code", run_code)


async def _approved(client: Any) -> int:
    (run,) = await _propose(client, 1)
    await login(client, "alice@acme.example")
    r = await client.post(
        f"/api/runs/{run['id']}/approve",
        json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
    )
    assert r.status_code == 200, r.text
    return run["id"]


# the reservation's arithmetic, the app's (the reservation under a race on PostgreSQL: the three tests
# above)
@pytest.mark.sqlite
async def test_a_run_that_ends_is_charged_what_it_used_and_gives_back_the_rest(client, vm) -> None:
    await enable_code()
    await _pool_covering(3)
    before = await _remaining(client)
    run_id = await _approved(client)
    held = await _remaining(client)
    assert held["remaining"] == pytest.approx(before["remaining"] - MAX_COST)
    assert held["reserved"] == MAX_COST

    assert await execution.execute(run_id) == "succeeded"
    real = credits.price(1, 1024, 10)[0]  # 1.30
    row = await Run.select(Run.credits_charged).where(Run.id == run_id).first()
    assert row["credits_charged"] == pytest.approx(real)  # a REAL column: single precision on PostgreSQL
    after = await _remaining(client)
    assert after["reserved"] == 0
    assert after["remaining"] == pytest.approx(held["remaining"] + MAX_COST - real)
    assert after["remaining"] == pytest.approx(before["remaining"] - real)


# the reservation's arithmetic, the app's (the reservation under a race on PostgreSQL: the first tests)
@pytest.mark.sqlite
async def test_a_cancelled_run_gives_back_all_of_its_reservation(client) -> None:
    await enable_code()
    await _pool_covering(3)
    before = await _remaining(client)
    run_id = await _approved(client)
    assert (await _remaining(client))["remaining"] == pytest.approx(before["remaining"] - MAX_COST)
    await login(client, "admin@acme.example")  # turning code execution off cancels what is queued
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert r.status_code == 200, r.text
    row = await Run.select(Run.status, Run.credits_charged).where(Run.id == run_id).first()
    assert row["status"] == RunStatus.cancelled and row["credits_charged"] is None
    after = await _remaining(client)
    assert after["reserved"] == 0 and after["remaining"] == pytest.approx(before["remaining"])


# the reservation's arithmetic, the app's (the reservation under a race on PostgreSQL: the first tests)
@pytest.mark.sqlite
async def test_a_run_that_never_starts_gives_back_its_reservation(client, vm, monkeypatch) -> None:
    """Refused before its VM (its staged data changed after approval): nothing charged, nothing held."""
    await enable_code()
    await _pool_covering(3)
    before = await _remaining(client)
    run_id = await _approved(client)
    execute = importlib.import_module("backend.execution.execute")
    monkeypatch.setattr(execute, "hash_problem", lambda run: "the staged data changed")
    assert await execution.execute(run_id) == "error"
    after = await _remaining(client)
    assert after["reserved"] == 0 and after["remaining"] == pytest.approx(before["remaining"])
