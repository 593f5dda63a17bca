"""The console's charts, at the data level: runs per day by status and the median VM start and duration per day
(GET /api/runs/stats, the runs page), findings per day by category (the audit review's findings-over-time
report), the company's queue depth over the last day (GET /api/system/queue-history, the health page), and the
plotly figures drawn from them.

Each chart shows only what its viewer may see. Hostile: another company's runs (Globex's, some with findings,
one finishing with a VM start that would move the median) are never counted for Acme, and a member's chart
never counts a colleague's run; beside each, the control that the viewer's own runs do move it. The demo seed
holds runs of its own, so counts are compared before and after, and medians on a day long ago that only this
test's runs finish on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.review.schemas import FindingsOnDay
from backend.runs import stats
from backend.runs.schemas import QueueHistory, RunStats
from backend.runs.tables import Run, RunStatus
from backend.tenancy.tables import Company
from console import charts
from tests.support.fleet import SNEAKY
from tests.support.http import token_for
from tests.support.metrics import _result, propose
from tests.support.runs import as_user, enable_code, proposal

pytestmark = pytest.mark.sqlite

TODAY = datetime.now(UTC).date().isoformat()


async def company(name: str) -> int:
    return (await Company.select(Company.id).where(Company.name == name).first())["id"]


async def run_stats(client, email: str, days: int = 30) -> RunStats:
    await as_user(client, email)
    response = await client.get("/api/runs/stats", params={"days": days})
    assert response.status_code == 200, response.text
    return RunStats.model_validate(response.json())


def today(body: RunStats) -> dict[str, int]:
    return next((dict(d.by_status) for d in body.runs_per_day if d.day == TODAY), {})


async def test_runs_per_day_and_timings_count_only_the_runs_the_viewer_may_list(client) -> None:
    await enable_code()
    await enable_code("Globex")
    alice, bob = await token_for(client, "alice@acme.example"), await token_for(client, "bob@acme.example")
    gina = await token_for(client, "gina@globex.example")
    admin_before = today(await run_stats(client, "admin@acme.example"))
    alice_before = today(await run_stats(client, "alice@acme.example"))

    # a day long ago on which only these runs finish: three of alice's, one of bob's, one of Globex's
    long_ago = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=200)
    day = long_ago.date().isoformat()
    for seconds, start_ms in ((4, 300.0), (40, 1200.0), (5, 3000.0)):
        await propose(client, alice, "succeeded", started_at=long_ago - timedelta(seconds=seconds),
                      finished_at=long_ago, result=_result(start_ms))  # fmt: skip
    await propose(client, bob, "failed", started_at=long_ago - timedelta(seconds=7),
                  finished_at=long_ago, result=_result(9000.0))  # fmt: skip
    await propose(client, gina, "succeeded", started_at=long_ago - timedelta(seconds=900),
                  finished_at=long_ago, result=_result(100_000.0))  # fmt: skip  # would move every median

    admin = await run_stats(client, "admin@acme.example", days=366)
    member = await run_stats(client, "alice@acme.example", days=366)
    globex = await run_stats(client, "admin@globex.example", days=366)

    def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
        return {
            s: after.get(s, 0) - before.get(s, 0)
            for s in {*before, *after}
            if after.get(s, 0) != before.get(s, 0)
        }

    # proposed today: alice's three and bob's one for the admin; alice's own three for alice; Globex's never
    assert moved(admin_before, today(admin)) == {"succeeded": 3, "failed": 1}
    assert moved(alice_before, today(member)) == {"succeeded": 3}
    assert today(globex).get("succeeded", 0) >= 1  # control: Globex's admin sees Globex's

    def timings(body: RunStats) -> tuple[int, float | None, float | None]:
        entry = next(t for t in body.timings_per_day if t.day == day)
        return entry.runs, entry.vm_start_p50_seconds, entry.duration_p50_seconds

    assert timings(admin) == (4, pytest.approx(2.1), pytest.approx(6.0))  # with bob's: 0.3 1.2 3 9 / 4 5 7 40
    assert timings(member) == (3, pytest.approx(1.2), pytest.approx(5.0))  # alice's own: no colleague's run
    assert timings(globex) == (1, pytest.approx(100.0), pytest.approx(900.0))  # control: Globex's own

    # the figures draw what the API said
    bars = charts.runs_per_day(admin)
    assert {bar.name for bar in bars.data} >= {"succeeded", "failed"}
    total_today = sum(y for bar in bars.data for x, y in zip(bar.x, bar.y, strict=True) if x == TODAY)
    assert total_today == sum(today(admin).values())
    lines = {line.name: dict(zip(line.x, line.y, strict=True)) for line in charts.run_timings(admin).data}
    assert lines["VM start p50"][day] == pytest.approx(2.1) and lines["duration p50"][day] == pytest.approx(
        6.0
    )
    empty = charts.runs_per_day(RunStats(days=30, runs_per_day=[], timings_per_day=[]))
    assert not empty.data and "No runs" in empty.layout.annotations[0].text


async def test_findings_over_time_are_the_company_s_own_and_a_reviewer_s(client) -> None:
    await enable_code()
    await enable_code("Globex")
    alice, gina = (
        await token_for(client, "alice@acme.example"),
        await token_for(client, "gina@globex.example"),
    )

    async def findings_today(email: str) -> dict[str, int]:
        await as_user(client, email)
        response = await client.get("/api/audit/reports/findings-over-time")
        assert response.status_code == 200, response.text
        rows = [FindingsOnDay.model_validate(r) for r in response.json()]
        return next((r.by_category for r in rows if r.day == TODAY), {})

    acme_before = await findings_today("admin@acme.example")
    globex_before = await findings_today("admin@globex.example")
    for headers in (gina, gina, alice):
        assert (
            await client.post("/api/runs", json=proposal(code=SNEAKY), headers=headers)
        ).status_code == 201
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201  # none found
    acme = await findings_today("admin@acme.example")
    globex = await findings_today("admin@globex.example")
    assert acme.get("invisible_characters", 0) - acme_before.get("invisible_characters", 0) == 1
    assert globex.get("invisible_characters", 0) - globex_before.get("invisible_characters", 0) == 2

    await as_user(client, "alice@acme.example")  # a member does not browse the company's review
    assert (await client.get("/api/audit/reports/findings-over-time")).status_code == 403

    figure = charts.findings_over_time([FindingsOnDay(day=TODAY, runs=1, by_category=acme)])
    assert {bar.name: list(bar.y) for bar in figure.data}["invisible characters"] == [
        acme["invisible_characters"]
    ]


async def test_the_queue_depth_over_the_last_day_comes_from_the_runs_own_times(client) -> None:
    await enable_code()
    await enable_code("Globex")
    alice, gina = (
        await token_for(client, "alice@acme.example"),
        await token_for(client, "gina@globex.example"),
    )
    acme, globex = await company("Acme Analytics"), await company("Globex")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    baseline = await stats.queue_history(acme, now=now)

    hours = timedelta(hours=1)
    # in the queue 5 h ago to 3 h ago; since 2 h ago and still; 30 h ago to 23 h ago (left within the window);
    # 6 h ago until it was cancelled unstarted 1 h ago
    await propose(client, alice, RunStatus.succeeded, approved_at=now - 5 * hours, started_at=now - 3 * hours,
                  finished_at=now - 3 * hours + timedelta(minutes=1))  # fmt: skip
    await propose(client, alice, RunStatus.queued, approved_at=now - 2 * hours)
    await propose(client, alice, RunStatus.failed, approved_at=now - 30 * hours, started_at=now - 23 * hours,
                  finished_at=now - 22 * hours)  # fmt: skip
    await propose(client, alice, RunStatus.cancelled, approved_at=now - 6 * hours, finished_at=now - hours)
    await propose(client, gina, RunStatus.queued, approved_at=now - 4 * hours)  # Globex's: never Acme's

    after = await stats.queue_history(acme, now=now)
    assert [p.at for p in after.points] == [p.at for p in baseline.points]
    assert len(after.points) == 24 * 4 + 1 and after.points[-1].at == now
    added = {p.at: p.depth - b.depth for p, b in zip(after.points, baseline.points, strict=True)}

    def expected(at: datetime) -> int:
        spans = [(5, 3), (2, None), (30, 23), (6, 1)]
        return sum(
            1
            for came, went in spans
            if now - came * hours <= at and (went is None or at < now - went * hours)
        )

    assert added == {at: expected(at) for at in added}
    assert (
        added[now - 4 * hours] == 2
        and added[now] == 1
        and added[now - 23 * hours - timedelta(minutes=15)] == 1
    )
    # control: Globex's queue has its run
    globex_now = (await stats.queue_history(globex, now=now)).points[-1].depth
    assert globex_now >= 1

    # the route answers the caller's own company's
    await as_user(client, "alice@acme.example")
    response = await client.get("/api/system/queue-history")
    assert response.status_code == 200
    history = QueueHistory.model_validate(response.json())
    assert history.points[-1].depth == await Run.count().where(
        (Run.company == acme) & (Run.status == RunStatus.queued)
    )
    figure = charts.queue_depth(history)
    assert list(figure.data[0].y) == [p.depth for p in history.points]
