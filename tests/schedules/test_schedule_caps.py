"""Schedules are capped per company, may not fire more often than the minimum interval, and check credits
each time they fire; the queue serves companies in turn, so one company's burst cannot starve another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend import execution
from backend.errors import Invalid
from backend.execution.loop import QUEUE_HEAD
from backend.runs.tables import Run
from backend.schedules import service as schedules
from backend.schedules.tables import Schedule
from backend.settings import get_settings
from backend.tenancy.tables import Company, User
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal


async def _succeeded(client, email: str = "alice@acme.example") -> int:
    token = await token_for(client, email)
    run = (await client.post("/api/runs", json=proposal(), headers=token)).json()
    assert (await approve_as(client, email, run)).status_code == 200
    client.cookies.clear()
    await Run.update({Run.status: "succeeded"}).where(Run.id == run["id"])
    return run["id"]


async def _schedule(client, run_id: int, cron: str, email: str = "alice@acme.example") -> object:
    client.cookies.clear()
    await login(client, email)
    response = await client.post("/api/schedules", json={"run_id": run_id, "cron": cron})
    client.cookies.clear()
    return response


@pytest.mark.parametrize(
    "cron, shortest",
    [
        ("* * * * *", timedelta(minutes=1)),
        ("*/5 * * * *", timedelta(minutes=5)),
        ("*/15 * * * *", timedelta(minutes=15)),
        ("0,5 7 * * *", timedelta(minutes=5)),  # twice a day, five minutes apart
        ("0 7 * * 1", timedelta(days=1)),  # weekly: never closer than a day, counted conservatively
        ("0 * * * *", timedelta(hours=1)),
        ("55 23 * * *", timedelta(days=1)),
        ("0,50 0,23 * * *", timedelta(minutes=10)),  # 23:50, then 00:00 the next day
        ("0 7 * * * */20", timedelta(seconds=20)),  # a seconds field
        ("0 7 * * * *", timedelta(seconds=1)),  # every second of 07:00
        ("*/15 * * * * 0", timedelta(minutes=15)),  # seconds field pinned to 0: fine
    ],
)
def test_shortest_interval(cron: str, shortest: timedelta) -> None:
    assert schedules.shortest_interval(cron) == shortest


@pytest.mark.parametrize(
    "cron", ["* * * * *", "*/14 * * * *", "0,5 7 * * *", "*/15 * * * * */30", "0 7 * * * *"]
)
def test_crons_firing_more_often_than_the_minimum_are_refused(cron: str) -> None:
    with pytest.raises(Invalid) as refused:
        schedules._validate(cron, "UTC")
    assert refused.value.code == "schedule_too_frequent" and "15 minutes" in str(refused.value.detail)


@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 7 * * 1", "30 8 1 * *", "0 */2 * * *"])
def test_crons_at_or_above_the_minimum_are_accepted(cron: str) -> None:
    schedules._validate(cron, "UTC")  # positive control


@pytest.mark.sqlite  # the cron's interval, checked before a save (the per-company cap stays on both engines)
async def test_the_api_refuses_a_too_frequent_cron_with_422(client) -> None:
    await enable_code()
    run_id = await _succeeded(client)
    for cron in ("* * * * *", "*/10 * * * *", "* * * * * *", "0 7 * * * */10"):
        r = await _schedule(client, run_id, cron)
        assert r.status_code == 422 and r.json()["error"] == "schedule_too_frequent", (cron, r.text)
    r = await _schedule(client, run_id, "*/15 * * * *")
    assert r.status_code == 201, r.text  # positive control


async def test_schedules_are_capped_per_company(client, monkeypatch) -> None:
    await enable_code()
    await enable_code("Globex")
    monkeypatch.setattr(get_settings(), "max_schedules_per_company", 3)
    alice_run, maria_run = await _succeeded(client), await _succeeded(client, "maria@acme.example")
    for run_id, email in ((alice_run, "alice@acme.example"), (alice_run, "alice@acme.example")):
        assert (await _schedule(client, run_id, "0 7 * * 1", email)).status_code == 201
    assert (await _schedule(client, maria_run, "0 8 * * 1", "maria@acme.example")).status_code == 201
    # the fourth of the company, whoever asks, is refused
    for run_id, email in ((alice_run, "alice@acme.example"), (maria_run, "maria@acme.example")):
        r = await _schedule(client, run_id, "0 9 * * 1", email)
        assert r.status_code == 409 and r.json()["error"] == "schedule_limit", r.text
        assert "3 schedules" in r.json()["detail"]
    # another company has its own allowance
    gina_run = await _succeeded(client, "gina@globex.example")
    assert (await _schedule(client, gina_run, "0 7 * * 1", "gina@globex.example")).status_code == 201
    # deleting one makes room again
    first = (await Schedule.select(Schedule.id).where(Schedule.origin_run == alice_run).first())["id"]
    await login(client, "alice@acme.example")
    assert (await client.delete(f"/api/schedules/{first}")).status_code == 204
    client.cookies.clear()
    assert (await _schedule(client, alice_run, "0 9 * * 1")).status_code == 201


def test_the_defaults() -> None:
    assert get_settings().max_schedules_per_company == 20
    assert get_settings().min_schedule_interval_minutes == 15


# the credit check at a firing, in Python (the queue's SQL on both engines: the tests below)
@pytest.mark.sqlite
async def test_a_firing_checks_credits(client) -> None:
    await enable_code()
    run_id = await _succeeded(client)
    sid = (await _schedule(client, run_id, "0 7 * * *")).json()["id"]
    later = datetime.now(UTC) + timedelta(days=2)
    await Company.update({Company.credit_pool: 0}).where(Company.name == "Acme Analytics")
    assert await schedules.fire(sid, later) is None
    row = await Schedule.select().where(Schedule.id == sid).first()
    assert row["status"] == "paused" and "credit pool is used up" in row["paused_reason"]
    assert not await Run.exists().where(Run.schedule_id == sid)
    # positive control: with credits again, resumed, it fires
    await Company.update({Company.credit_pool: 10_000}).where(Company.name == "Acme Analytics")
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/schedules/{sid}/resume")).status_code == 200
    client.cookies.clear()
    assert await schedules.fire(sid, later) is not None


@pytest.mark.sqlite  # the interval re-checked in Python when it fires, not an engine's
async def test_a_schedule_from_before_the_minimum_is_paused_when_it_fires(client) -> None:
    await enable_code()
    run_id = await _succeeded(client)
    sid = (await _schedule(client, run_id, "*/15 * * * *")).json()["id"]
    await Schedule.update({Schedule.cron: "* * * * *"}).where(Schedule.id == sid)
    later = datetime.now(UTC) + timedelta(days=2)
    assert await schedules.fire(sid, later) is None
    row = await Schedule.select().where(Schedule.id == sid).first()
    assert row["status"] == "paused" and "at most once every 15 minutes" in row["paused_reason"]


async def _queue_directly(company_name: str, email: str, count: int) -> list[int]:
    """Queued runs as the worker sees them (the ordering does not look at anything else)."""
    company = (await Company.select(Company.id).where(Company.name == company_name).first())["id"]
    user = (await User.select(User.id).where(User.email == email).first())["id"]
    now = datetime.now(UTC)
    ids = []
    for i in range(count):
        run = Run(
            company=company,
            requested_by=user,
            conversation_id="burst",
            title=f"burst {i}",
            plan="",
            code="print(1)",
            code_sha256="0" * 64,
            status="queued",
            bundle_dir="",
            bundle_sha256="0" * 64,
            created_at=now,
            updated_at=now,
        )
        await run.save()
        ids.append(run.id)
    return ids


async def test_the_queue_serves_companies_in_turn(demo_db: str) -> None:
    burst = await _queue_directly("Acme Analytics", "alice@acme.example", 50)
    single = await _queue_directly("Globex", "gina@globex.example", 1)
    more = await _queue_directly("Acme Analytics", "maria@acme.example", 2)
    order = await execution.queued_ids()
    # Globex's one run is second, right after Acme's oldest, not behind Acme's 52
    assert order[:2] == [burst[0], single[0]]
    # each company's own runs keep their age order
    acme = [i for i in order if i != single[0]]
    assert acme == burst + more
    # the worker's loop takes the head of this list up to its VM cap: with two VMs, both companies start
    assert set(order[: get_settings().max_concurrent_vms]) == {burst[0], single[0]}


async def test_a_company_already_running_waits_behind_one_that_is_not(demo_db: str) -> None:
    burst = await _queue_directly("Acme Analytics", "alice@acme.example", 5)
    await Run.update({Run.status: "running"}).where(Run.id.is_in(burst[:2]))
    single = await _queue_directly("Globex", "gina@globex.example", 1)
    # Acme has runs on the VMs already: Globex's only run goes first although it is younger
    assert await execution.queued_ids() == [single[0], *burst[2:]]
    # positive control: with nothing running, age decides among the first in line
    await Run.update({Run.status: "queued"}).where(Run.id.is_in(burst[:2]))
    assert (await execution.queued_ids())[:2] == [burst[0], single[0]]


async def test_the_head_of_the_queue_read_alone_is_the_head_of_the_whole_order(demo_db: str) -> None:
    """A worker or the fleet's dispatcher reads only as far as it has slots (`queued_ids(limit=…)`: each
    company's oldest runs, not the whole backlog); what it reads is the whole order's head, for every length,
    with companies already running and companies that queued later."""
    acme = await _queue_directly("Acme Analytics", "alice@acme.example", 7)
    globex = await _queue_directly("Globex", "gina@globex.example", 3)
    await Run.update({Run.status: "running"}).where(Run.id.is_in(acme[:2]))
    acme += await _queue_directly("Acme Analytics", "maria@acme.example", 2)
    globex += await _queue_directly("Globex", "gina@globex.example", 1)
    whole = await execution.queued_ids()
    assert len(whole) == 11 and whole[0] == globex[0]  # Acme runs two already: Globex goes first
    for length in range(len(whole) + 2):
        assert await execution.queued_ids(limit=length) == whole[:length], length
    # the rows a short read costs: each company's first few, not its whole line
    head = await Run.raw(QUEUE_HEAD, "queued", 2)
    assert sorted(row["id"] for row in head) == sorted([*acme[2:4], *globex[:2]])
