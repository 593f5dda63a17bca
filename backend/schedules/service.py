"""Schedules: only a run that proposed zero actions can be scheduled; every firing checks that again, re-stages
fresh data with the owner's current visibility, runs the frozen code, and never reads an actions.json.
A company holds at most `max_schedules_per_company` schedules, none firing more often than every
`min_schedule_interval_minutes`, and each firing checks the credit pool first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from backend import clock
from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.errors import AppError, Conflict, Forbidden, Invalid, NotFound
from backend.flows import service as flows
from backend.flows.tables import Flow, FlowStatus
from backend.notify import service as notify
from backend.runs import gates, proposal
from backend.runs.proposal import Made, Proposal, Proposer, Refused, StepSpec
from backend.runs.read import get_run_row
from backend.runs.rows import whole_run
from backend.runs.tables import Run, RunStatus
from backend.schedules.schemas import ScheduleInfo
from backend.schedules.tables import Schedule, ScheduleStatus
from backend.settings import get_settings
from backend.staging import service as staging
from backend.tenancy.context import UserContext, load_user_context
from backend.tenancy.tables import User


def next_fire(cron: str, timezone: str, after: datetime) -> datetime:
    tz = ZoneInfo(timezone)
    return croniter(cron, after.astimezone(tz)).get_next(datetime).astimezone(UTC)


def _validate(cron: str, timezone: str) -> None:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise Invalid(f"unknown time zone {timezone!r} (use an IANA name like Europe/Berlin)") from exc
    if not croniter.is_valid(cron):
        raise Invalid(f"{cron!r} is not a valid cron expression (five fields: minute hour day month weekday)")
    minimum = timedelta(minutes=get_settings().min_schedule_interval_minutes)
    shortest = shortest_interval(cron)
    if shortest < minimum:
        raise Invalid(
            f"{cron!r} can fire {_duration(shortest)} after its previous firing; a schedule may fire at most "
            f"once every {_duration(minimum)}",
            code="schedule_too_frequent",
        )


def shortest_interval(cron: str) -> timedelta:
    """The shortest time between two consecutive firings of `cron`, a seconds field included.

    Every day that fires, fires at the same times of day (second × minute × hour), so the shortest gap
    is between two neighbouring times of one day, or from a day's last time to the next day's first,
    counted as if the next day fired too (which can only make the answer shorter, never longer).
    """
    fields = croniter(cron).expanded
    seconds = fields[5] if len(fields) > 5 else [0]

    def values(field: list[Any], size: int) -> list[int]:
        if field == ["*"]:
            return list(range(size))
        if not all(isinstance(v, int) for v in field):
            raise Invalid(f"{cron!r}: use numbers, ranges, lists and steps for seconds, minutes and hours")
        return sorted(set(field))

    times = sorted(
        h * 3600 + m * 60 + s
        for h in values(fields[1], 24)
        for m in values(fields[0], 60)
        for s in values(seconds, 60)
    )
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    gaps.append(times[0] + 86400 - times[-1])
    return timedelta(seconds=min(gaps))


def _duration(delta: timedelta) -> str:
    total = int(delta.total_seconds())
    if total < 60:
        return f"{total} second{'s' if total != 1 else ''}"
    minutes = total // 60
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


async def _proposed_actions(run: dict[str, Any]) -> int:
    items = await ActionItem.count().where(ActionItem.run == run["id"])
    result = run["result"] or {}
    return items + len(result.get("actions") or [])


def payload(row: dict[str, Any], title: str = "", owner_email: str = "") -> ScheduleInfo:
    return ScheduleInfo(
        **row, run_id=row["origin_run"], flow_id=row["origin_flow"], title=title, owner_email=owner_email
    )


async def _flow_origin(ctx: UserContext, flow_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A flow that may be scheduled: succeeded, not itself a firing, and no step proposed a change."""
    flow = await flows.get_flow_row(ctx, flow_id)
    if flow["requested_by"] != ctx.user_id and not ctx.is_admin:
        raise Forbidden("only the flow's owner or an admin can schedule it")
    if flow["status"] != FlowStatus.succeeded:
        raise Conflict(f"only a succeeded flow can be scheduled; flow {flow_id} is {flow['status']}")
    if flow["schedule_id"]:
        raise Conflict("this flow was itself fired by a schedule; schedule its origin flow instead")
    steps = await flows.step_rows(flow_id)
    for step in steps:
        if await _proposed_actions(step) or step["actions_note"]:
            raise Conflict(
                f"step {step['flow_step']} proposed changes, so the flow cannot be scheduled: only a flow whose "
                "steps all proposed zero actions can be, and its firings run every step read-only",
                code="run_has_actions",
            )
    return flow, steps


async def create(
    ctx: UserContext, run_id: int | None, cron: str, timezone: str = "UTC", *, flow_id: int | None = None
) -> ScheduleInfo:
    ctx.require_person("scheduling a run")
    await gates.require_code_execution(ctx.company_id)
    if (run_id is None) == (flow_id is None):
        raise Invalid("name exactly one of run_id (a succeeded run) and flow_id (a succeeded flow)")
    if flow_id is not None:
        _flow, steps = await _flow_origin(ctx, flow_id)
        run = steps[0]
        run_id = run["id"]
    else:
        assert run_id is not None
        run = await get_run_row(ctx, run_id)
        if run["flow_id"] is not None:
            raise Conflict(
                f"run {run_id} is step {run['flow_step']} of flow {run['flow_id']}; schedule the flow instead",
                code="flow_step",
            )
        if run["requested_by"] != ctx.user_id and not ctx.is_admin:
            raise Forbidden("only the run's owner or an admin can schedule it")
        if run["status"] != RunStatus.succeeded:
            raise Conflict(f"only a succeeded run can be scheduled; run {run_id} is {run['status']}")
        if run["schedule_id"]:
            raise Conflict("this run was itself fired by a schedule; schedule its origin run instead")
        if await _proposed_actions(run) or run["actions_note"]:
            raise Conflict(
                "a run that proposed changes cannot be scheduled: a scheduled run may not write",
                code="run_has_actions",
            )
    _validate(cron, timezone)
    cap = get_settings().max_schedules_per_company
    if await Schedule.count().where(Schedule.company == ctx.company_id) >= cap:
        raise Conflict(
            f"the company already has {cap} schedules, the most it may hold; delete one first",
            code="schedule_limit",
        )
    now = clock.now()
    row = Schedule(
        company=ctx.company_id,
        owner=run["requested_by"],
        origin_run=run_id,
        origin_flow=flow_id,
        cron=cron,
        timezone=timezone,
        status=ScheduleStatus.active,
        next_fire_at=next_fire(cron, timezone, now),
        created_at=now,
    )
    await row.save()
    await audit.record(
        "schedule.created",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="schedule",
        subject_id=row.id,
        data={
            "run_id": run_id,
            "flow_id": flow_id,
            "cron": cron,
            "timezone": timezone,
            "code_sha256": run["code_sha256"],
        },
    )
    return await get(ctx, row.id)


async def _row(ctx: UserContext, schedule_id: int) -> dict[str, Any]:
    row = (
        await Schedule.select()
        .where((Schedule.id == schedule_id) & (Schedule.company == ctx.company_id))
        .first()
    )
    if row is None or not (ctx.sees_company_history or row["owner"] == ctx.user_id):
        raise NotFound(f"no schedule {schedule_id}")
    return row


async def get(ctx: UserContext, schedule_id: int) -> ScheduleInfo:
    row = await _row(ctx, schedule_id)
    if row["origin_flow"] is not None:
        run = await Flow.select(Flow.title).where(Flow.id == row["origin_flow"]).first()
    else:
        run = await Run.select(Run.title).where(Run.id == row["origin_run"]).first()
    owner = await User.select(User.email).where(User.id == row["owner"]).first()
    return payload(row, run["title"] if run else "", owner["email"] if owner else "")


async def list_schedules(ctx: UserContext) -> list[ScheduleInfo]:
    query = Schedule.select().where(Schedule.company == ctx.company_id)
    if not ctx.sees_company_history:  # an auditor reads every schedule and what it reads
        query = query.where(Schedule.owner == ctx.user_id)
    return [await get(ctx, r["id"]) for r in await query.order_by(Schedule.id)]


async def set_status(ctx: UserContext, schedule_id: int, status: ScheduleStatus) -> ScheduleInfo:
    ctx.require_person("pausing or resuming a schedule")
    row = await _row(ctx, schedule_id)
    values: dict[Any, Any] = {
        Schedule.status: status,
        Schedule.paused_reason: None if status == ScheduleStatus.active else "paused by " + ctx.email,
    }
    if status == ScheduleStatus.active:
        values[Schedule.next_fire_at] = next_fire(row["cron"], row["timezone"], clock.now())
    await Schedule.update(values).where(Schedule.id == schedule_id)
    await audit.record(
        f"schedule.{'resumed' if status == ScheduleStatus.active else 'paused'}",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="schedule",
        subject_id=schedule_id,
    )
    return await get(ctx, schedule_id)


async def delete(ctx: UserContext, schedule_id: int) -> None:
    ctx.require_person("deleting a schedule")
    await _row(ctx, schedule_id)
    await Schedule.delete().where(Schedule.id == schedule_id)
    await audit.record(
        "schedule.deleted",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="schedule",
        subject_id=schedule_id,
    )


async def _pause(row: dict[str, Any], reason: str) -> None:
    await Schedule.update({Schedule.status: ScheduleStatus.paused, Schedule.paused_reason: reason}).where(
        Schedule.id == row["id"]
    )
    await audit.record(
        "schedule.paused",
        actor="scheduler",
        company_id=row["company"],
        subject_type="schedule",
        subject_id=row["id"],
        data={"reason": reason},
    )
    # its owner is told that it could not fire (the reason is on its page, not in the message)
    origin = f"/flows/{row['origin_flow']}" if row.get("origin_flow") else f"/runs/{row['origin_run']}"
    notice = notify.Notice(
        event="schedule.failed",
        company_id=row["company"],
        subject_type="schedule",
        subject_id=row["id"],
        path=origin,
        status="paused",
    )
    await notify.emit(notice, [row["owner"]])


async def fire(schedule_id: int, now: datetime | None = None) -> int | None:
    """One firing. Returns the queued run's id, or None when a check failed (the schedule is then paused)."""
    now = now or clock.now()
    row = await Schedule.select().where(Schedule.id == schedule_id).first()
    if row is None or row["status"] != ScheduleStatus.active:
        return None
    if not await _claim_firing(row, now):
        return None  # another dispatcher (a second API replica) fired this one meanwhile
    if row["origin_flow"] is not None:
        origins = await flows.step_rows(row["origin_flow"])
    else:
        origin = await whole_run(row["origin_run"])
        origins = [origin] if origin is not None else []
    if not origins:
        await _pause(row, "the origin run no longer exists")
        return None
    for origin in origins:
        if await _proposed_actions(origin) or origin["actions_note"]:
            await _pause(row, "the origin run proposed changes; a scheduled run may not write")
            return None
    try:  # a schedule created before the minimum interval existed
        _validate(row["cron"], row["timezone"])
    except AppError as exc:
        await _pause(row, str(exc.detail))
        return None
    try:
        owner = await load_user_context(row["owner"])
    except AppError as exc:
        await _pause(row, f"the owner no longer holds every permission this run needs: {exc.detail}")
        return None
    is_flow = row["origin_flow"] is not None
    origin_flow = await Flow.select().where(Flow.id == row["origin_flow"]).first() if is_flow else None
    head = origin_flow or origins[0]
    firing = Firing(row, origins, flows.FLOW if is_flow else proposal.RUN, origin_flow)
    try:
        made = await proposal.propose(
            Proposal(
                by=Proposer.schedule,
                ctx=owner,
                conversation_id=head["conversation_id"],
                title=f"{head['title']} (scheduled)"[:200] if is_flow else f"{head['title']} (scheduled)",
                plan=head["plan"],
                steps=[
                    StepSpec(
                        title=o["title"],
                        code=o["code"],
                        datasets=o["datasets"],
                        file_ids=o["file_ids"],
                        limits=o["limits"],
                        receives=(o["receives"] or []) if is_flow else [],
                        read_actions=False,
                        frozen_sha256=o["code_sha256"],
                    )
                    for o in origins
                ],
                actor="scheduler",
                schedule_id=row["id"],
                now=now,
            ),
            firing,
        )
    except Refused as exc:
        await _pause(row, exc.reason)
        return None
    return made.runs[0].id


class Firing:
    """A schedule's firing made by the run's or the flow's maker, and put on the record as its firing too:
    the schedule's last run and `schedule.fired`."""

    def __init__(
        self,
        row: dict[str, Any],
        origins: list[dict[str, Any]],
        maker: proposal.Maker,
        origin_flow: dict[str, Any] | None,
    ) -> None:
        self.row, self.origins, self.maker, self.origin_flow = row, origins, maker, origin_flow
        self.noun = maker.noun

    async def create(
        self, p: Proposal, steps: list[proposal.PlannedStep], bundles: list[staging.StagedBundle], made: Made
    ) -> None:
        if self.origin_flow is not None:  # a firing keeps its origin flow's cap on action items
            made.extra["action_cap"] = self.origin_flow["action_cap"]
        await self.maker.create(p, steps, bundles, made)

    async def audit(self, p: Proposal, made: Made) -> None:
        await self.maker.audit(p, made)
        first = made.runs[0]
        if made.flow_id is None:
            data = {
                "schedule_id": self.row["id"],
                "origin_run": self.origins[0]["id"],
                "code_sha256": self.origins[0]["code_sha256"],
                "bundle_sha256": first.bundle_sha256,
            }
            await _fired(self.row, first.id, "run", first.id, data)
        else:
            data = {
                "schedule_id": self.row["id"],
                "origin_flow": self.row["origin_flow"],
                "first_run": first.id,
            }
            await _fired(self.row, first.id, "flow", made.flow_id, data)


async def _claim_firing(row: dict[str, Any], now: datetime) -> bool:
    """Move the schedule to its next time, conditional on it still being at the time read: of two
    dispatchers firing the same schedule at once exactly one gets True, before anything is staged."""
    try:
        upcoming = next_fire(row["cron"], row["timezone"], now)
    except (ValueError, KeyError):  # a bad cron or time zone (KeyError: ZoneInfoNotFoundError)
        upcoming = row["next_fire_at"]  # its cron is checked (and the schedule paused) further on
    claimed = await (
        Schedule.update({Schedule.next_fire_at: upcoming, Schedule.last_fired_at: now})
        .where(
            (Schedule.id == row["id"])
            & (Schedule.status == ScheduleStatus.active)
            & (Schedule.next_fire_at == row["next_fire_at"])
        )
        .returning(Schedule.id)
    )
    return bool(claimed)


async def _fired(
    row: dict[str, Any], run_id: int, subject_type: str, subject_id: int, data: dict[str, Any]
) -> None:
    """A firing happened (its time was claimed by `_claim_firing`): what it made, and the audit entry."""
    await Schedule.update({Schedule.last_run_id: run_id}).where(Schedule.id == row["id"])
    await audit.record(
        "schedule.fired",
        actor="scheduler",
        company_id=row["company"],
        subject_type=subject_type,
        subject_id=subject_id,
        data=data,
    )


async def fire_due(now: datetime | None = None) -> list[int]:
    now = now or clock.now()
    due = await Schedule.select(Schedule.id).where(
        (Schedule.status == ScheduleStatus.active) & (Schedule.next_fire_at <= now)
    )
    fired = []
    for row in due:
        run_id = await fire(row["id"], now)
        if run_id:
            fired.append(run_id)
    return fired
