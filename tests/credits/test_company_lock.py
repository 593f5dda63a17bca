"""What spends a company's credits against what is left is serialized on the company's row, and nothing
else waits on it (PostgreSQL; SQLite serializes every write transaction anyway).

The lock `credits.lock_company` takes is FOR NO KEY UPDATE. Two spenders of one company cannot both hold it,
so a reservation reads the spending of every one before it (the protection, as the hostile timing of
tests/credits/test_no_overdraft.py attacks it). But a proposal of that company goes through while a spender
holds it: inserting a run takes FOR KEY SHARE on the company's row, which NO KEY UPDATE lets through and FOR
UPDATE (the strength used before, 2026-12-05) did not. At a thousand assistants of one company every
proposal's INSERT waited behind the approvals and charges in flight (docs/scale.md, item 14). The control
holds the row FOR UPDATE and shows the same proposal waiting, so the test sees a lock that blocks it.

A run's charge takes no turn on the company's row at all: it spends what the approval reserved. Its charges
take turns per run instead (two posts of one result at once), which the controls show."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from backend.audit import service as audit
from backend.credits import service as credits
from backend.credits.tables import CreditCharge
from backend.runs.tables import Run
from backend.tenancy.tables import Company
from tests.support.runs import proposal

pytestmark = pytest.mark.postgres

WAITS = 1.5  # seconds a blocked party is given to show it is blocked; an unblocked one answers in far less
HOLD = 4.0  # seconds a holder keeps the lock at most: a proposal blocked by it takes about that long


async def _acme() -> int:
    return (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]


@asynccontextmanager
async def _held(lock: Callable[[int], Awaitable[object]], key: int | None = None) -> AsyncIterator[None]:
    """Another party's transaction holding `lock` (of the company, or of `key`) until the block ends, or HOLD
    seconds at most. It runs in a thread on an event loop of its own: the test client answers a request on
    the test's own thread, so a holder on the test's loop could never let go of a lock that request waits
    for; this one lets go by the clock then."""
    key = await _acme() if key is None else key
    holding, done = threading.Event(), threading.Event()

    async def spender() -> None:
        async with audit.atomic():
            await lock(key)
            holding.set()
            await asyncio.to_thread(done.wait, HOLD)

    thread = threading.Thread(target=asyncio.run, args=(spender(),))
    thread.start()
    try:
        assert await asyncio.to_thread(holding.wait, 10), "the holder never took the lock"
        yield
    finally:
        done.set()
        await asyncio.to_thread(thread.join)


async def _for_update(company_id: int) -> None:
    await Company.select(Company.id).where(Company.id == company_id).lock_rows("UPDATE")


async def _propose_while_held(client, alice, lock: Callable[[int], Awaitable[object]]) -> float:
    """Seconds a proposal of the company took while another party held its row by `lock`."""
    before = await Run.count()
    async with _held(lock):
        started = time.monotonic()
        r = await client.post("/api/runs", json=proposal(), headers=alice)
        took = time.monotonic() - started
    assert r.status_code == 201, r.text
    assert await Run.count() == before + 1
    return took


async def test_a_proposal_goes_through_while_a_spender_of_its_company_holds_the_lock(
    client, alice, acme_on
) -> None:
    assert await _propose_while_held(client, alice, credits.lock_company) < HOLD / 2


async def test_control_the_same_proposal_waits_while_the_row_is_held_for_update(
    client, alice, acme_on
) -> None:
    took = await _propose_while_held(client, alice, _for_update)
    assert took > HOLD / 2, (
        "the proposal went through a row held FOR UPDATE: this test cannot see a blocking lock"
    )


async def test_a_second_spender_of_the_company_waits_for_the_first(demo_db: str) -> None:
    """The protection itself: a reservation (or charge) of the same company cannot take the lock while
    another holds it, so it reads what the first spent once that one commits."""
    company_id = await _acme()
    async with _held(credits.lock_company):

        async def second() -> None:
            async with audit.atomic():
                await credits.lock_company(company_id)

        waiting = asyncio.create_task(second())
        done, _ = await asyncio.wait({waiting}, timeout=WAITS)
        assert not done, "a second spender took the company's lock while the first held it"
    await asyncio.wait_for(waiting, 30)


async def test_control_a_spender_of_another_company_does_not_wait(demo_db: str) -> None:
    other = (await Company.select(Company.id).where(Company.name != "Acme Analytics").first())["id"]
    async with _held(credits.lock_company):

        async def elsewhere() -> None:
            async with audit.atomic():
                await credits.lock_company(other)

        await asyncio.wait_for(elsewhere(), WAITS)


async def _charge(run_id: int) -> float:
    return await credits.charge(
        company_id=await _acme(), user_id=1, run_id=run_id, run_title="t", vcpus=1, memory_mib=512,
        seconds=30.0, actor=f"worker:run-{run_id}",
    )  # fmt: skip


async def test_a_run_is_charged_while_a_reservation_of_its_company_holds_the_lock(demo_db: str) -> None:
    """A charge spends what its run's approval reserved: it waits for no reservation of its company (it did
    until 2026-12-05, at every result a host posted)."""
    async with _held(credits.lock_company):
        await asyncio.wait_for(_charge(9101), WAITS)
    assert await CreditCharge.count().where(CreditCharge.run_id == 9101) == 1


async def test_control_a_second_charge_of_the_same_run_waits_for_the_first(demo_db: str) -> None:
    """What keeps a run charged once when its result is posted twice at once: the run's charges take turns
    (tests/credits/test_charged_once.py attacks it with two posts at once)."""
    async with _held(credits._lock_charge_of, key=9102):
        charging = asyncio.create_task(_charge(9102))
        done, _ = await asyncio.wait({charging}, timeout=WAITS)
        assert not done, "a charge of the run went through while another charge of it was in its transaction"
    await asyncio.wait_for(charging, 30)
    assert await CreditCharge.count().where(CreditCharge.run_id == 9102) == 1


async def test_control_a_charge_of_another_run_does_not_wait(demo_db: str) -> None:
    async with _held(credits._lock_charge_of, key=9103):
        await asyncio.wait_for(_charge(9104), WAITS)
