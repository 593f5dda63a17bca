"""actions.json → approval items → one accepted item at a time, re-checked against permission and version.

Nothing from a run's output reaches the records except through `accept`.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from backend import clock, decisions
from backend.actions.schemas import ActionItemInfo
from backend.actions.tables import ActionItem, ItemStatus
from backend.audit import service as audit
from backend.errors import Conflict, Forbidden, NotFound
from backend.records import tables as record_tables
from backend.records.datasets import DATASETS, REFERENCES, AnyDataset
from backend.records.service import select_columns
from backend.records.values import ValueProblem, coerce_value, to_json
from backend.records.visibility import find_dataset, visible_record
from backend.runs.read import get_run_row
from backend.runs.tables import Run
from backend.sandbox import actions_cap
from backend.staging.service import staged_versions
from backend.tenancy.context import UserContext


class ItemProblem(Exception):
    pass


def coerce(dataset: AnyDataset, field: str, value: Any) -> Any:
    """A proposed value as the column's Python type; ItemProblem with a readable reason otherwise. The same
    check (records/values.py) for a built-in's column and a company-defined one's."""
    if field not in dataset.writable_fields:  # ids, owners, teams, versions: never a proposal's
        raise ItemProblem(f"{field} cannot be changed by a proposal")
    try:
        return coerce_value(dataset.spec(field), value)
    except ValueProblem as exc:
        raise ItemProblem(str(exc)) from exc


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


async def entry_dataset(entry: Any, company_id: int) -> AnyDataset | None:
    """The dataset an actions.json entry names, a built-in or one `company_id` defined; None when it names
    none (parse_entry then says why)."""
    name = entry.get("dataset") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not name:
        return None
    return await find_dataset(company_id, name)


def parse_entry(entry: Any, dataset: AnyDataset | None = None) -> dict[str, Any]:
    """Shape check of one actions.json entry (no database access). `dataset`: the one it names, as
    `entry_dataset` found it in the company (default: the built-ins only)."""
    if not isinstance(entry, dict):
        raise ItemProblem("each action must be an object")
    unknown = set(entry) - {"op", "dataset", "record_id", "changes", "reason"}
    if unknown:
        raise ItemProblem(f"unknown keys {sorted(unknown)}")
    op = entry.get("op")
    if op not in ("create", "update"):
        raise ItemProblem("op must be 'create' or 'update'")
    if dataset is None:
        dataset = DATASETS.get(entry.get("dataset") or "")
    if dataset is None or dataset.name != entry.get("dataset"):
        raise ItemProblem(f"unknown dataset {entry.get('dataset')!r}")
    record_id = entry.get("record_id")
    if op == "update" and (isinstance(record_id, bool) or not isinstance(record_id, int)):
        raise ItemProblem("an update needs a numeric record_id")
    if op == "create" and record_id is not None:
        raise ItemProblem("a create must not name a record_id")
    changes = entry.get("changes")
    if not isinstance(changes, dict) or not changes:
        raise ItemProblem("changes must be a non-empty object of field: value")
    not_writable = sorted(set(changes) - set(dataset.writable_fields))
    if not_writable:
        raise ItemProblem(f"fields not writable in {dataset.name}: {not_writable}")
    for field, value in changes.items():
        coerce(dataset, field, value)
    reason = entry.get("reason", "")
    if not isinstance(reason, str):
        raise ItemProblem("reason must be text")
    return {
        "op": op,
        "dataset": dataset.name,
        "builtin": dataset.builtin,
        "record_id": record_id,
        "changes": changes,
        "reason": reason[:2000],
    }


async def _check_permission(
    ctx: UserContext, parsed: dict[str, Any], dataset: AnyDataset
) -> dict[str, Any] | None:
    """What the user may change: edit permission on the dataset, and for updates a record they can see (the
    one visibility rule, `visible_record`); for a company-defined dataset's create, a new external key."""
    if not ctx.can(dataset.name, "edit"):
        raise ItemProblem(f"{ctx.email} has no edit permission on {dataset.name}")
    if parsed["op"] == "update":
        record = await visible_record(ctx, dataset, parsed["record_id"], *select_columns(dataset))
        if record is None:
            raise ItemProblem(
                f"{dataset.name} record {parsed['record_id']} does not exist or is not visible to {ctx.email}"
            )
        return dataset.decode([record])[0]
    if not dataset.builtin:
        await _new_key(dataset, parsed["changes"])
    return None


async def _new_key(dataset: AnyDataset, changes: dict[str, Any]) -> str:
    """A create in a company-defined dataset sets its key column to a key no row of the dataset has."""
    value = changes.get(dataset.key_column)
    if value is None or value == "":
        raise ItemProblem(f"a new {dataset.name} record needs its key column {dataset.key_column}")
    key = str(to_json(coerce(dataset, dataset.key_column, value)))
    table = record_tables.DatasetRow
    if await table.exists().where((table.dataset == dataset.id) & (table.external_key == key)):
        raise ItemProblem(f"{dataset.name} already has a record with {dataset.key_column} {key!r}")
    return key


async def _check_bounds(ctx: UserContext, run: dict[str, Any], parsed: dict[str, Any]) -> None:
    """A change stays inside what was approved: only a dataset the run staged, and reference fields that
    point to a record of the run's company (never another company's id)."""
    staged = list(run["datasets"] or [])
    if parsed["dataset"] not in staged:
        raise ItemProblem(
            f"run {run['id']} staged only {', '.join(staged) or 'no datasets'}; "
            f"a change to {parsed['dataset']} is outside the scope that was approved"
        )
    for field, value in parsed["changes"].items():
        target = REFERENCES.get(field) if parsed.get("builtin", True) else None
        if target is None or value is None:
            continue
        table = DATASETS[target].table
        found = 0 < value < 2**31 and await table.exists().where(
            (table.id == value) & (table.company == ctx.company_id)
        )
        if not found:
            raise ItemProblem(f"{field} {value} does not point to a record in {target} of this company")


async def ingest(run: dict[str, Any], entries: list[Any], requester: UserContext) -> int:
    """Turn a run's actions.json, as the sandbox parsed it, into items; returns how many. The sandbox
    rejects a file over `actions_cap()` whole, so no part of one ever becomes items here either."""
    if len(entries) > actions_cap():
        raise ValueError(
            f"{len(entries)} actions are over the cap of {actions_cap()}; the sandbox rejects such a file"
        )
    versions: dict[str, dict[int, int]] = {}
    for index, entry in enumerate(entries):
        item: dict[str, Any] = {
            "company": run["company"],
            "run": run["id"],
            "index": index,
            "status": ItemStatus.pending,
        }
        try:
            dataset = await entry_dataset(entry, requester.company_id)
            parsed = parse_entry(entry, dataset)
            assert dataset is not None  # parse_entry refused an entry naming no dataset
            item.update(
                op=parsed["op"],
                dataset=parsed["dataset"],
                record_id=parsed["record_id"],
                changes=parsed["changes"],
                reason=parsed["reason"],
            )
            record = await _check_permission(requester, parsed, dataset)
            await _check_bounds(requester, run, parsed)
            if record is not None:
                item["before"] = {f: _json_value(record.get(f)) for f in parsed["changes"]}
                staged = versions.setdefault(
                    parsed["dataset"], staged_versions(run["bundle_dir"], parsed["dataset"])
                )
                item["staged_version"] = staged.get(parsed["record_id"], record["version"])
        except ItemProblem as exc:
            item.update(status=ItemStatus.invalid, problem=str(exc))
        item["raw"] = json.dumps(entry, default=str)[:4000]
        await ActionItem.insert(ActionItem(**item))
    await Run.update({Run.action_items_count: len(entries)}).where(Run.id == run["id"])
    return len(entries)


def _unreviewed(run: dict[str, Any] | None) -> bool:
    """A run no person approved: a follow-up let through by an earlier approval's grant."""
    return run is not None and run["narrowed_from"] is not None


def item_payload(row: dict[str, Any], run: dict[str, Any] | None) -> ActionItemInfo:
    """An item as the API shows it, with the run it came from (and, for a flow's step, the flow and step)."""
    return ActionItemInfo(
        id=row["id"],
        run_id=row["run"],
        flow_id=run["flow_id"] if run else None,
        flow_step=run["flow_step"] if run else None,
        index=row["index"],
        op=row["op"] or None,
        dataset=row["dataset"] or None,
        record_id=row["record_id"],
        changes=row["changes"],
        before=row["before"],
        reason=row["reason"],
        status=row["status"],
        problem=row["problem"],
        raw=row["raw"] if row["status"] == ItemStatus.invalid else None,
        decided_by=row["decided_by"],
        decided_at=row["decided_at"],
        created_record_id=row["created_record_id"],
        unreviewed_run=_unreviewed(run),
    )


async def list_items(ctx: UserContext, run_id: int) -> list[ActionItemInfo]:
    run = await get_run_row(ctx, run_id)
    rows = (
        await ActionItem.select()
        .where(ActionItem.run == run_id)
        .order_by(ActionItem.index)
        .output(load_json=True)
    )
    return [await shown_to(ctx, run, item_payload(r, run)) for r in rows]


VALUES_WITHHELD = "withheld: an auditor sees this change's values only when they may read the record"


async def may_read_values(ctx: UserContext, run: dict[str, Any], item: ActionItemInfo) -> bool:
    """Whether `ctx` sees an item's values: anyone but an auditor (who reached the run), the run's own
    requester, and an auditor who may read the record itself, by the one visibility rule. The audit export
    asks this too, for the entries about an item."""
    if not ctx.is_auditor or run["requested_by"] == ctx.user_id:
        return True
    record_id = item.record_id if item.op == "update" else item.created_record_id
    dataset = await find_dataset(ctx.company_id, item.dataset) if item.dataset else None
    if dataset is None or not ctx.can(dataset.name) or record_id is None:
        return False
    return bool(await visible_record(ctx, dataset, record_id, dataset.table.id))


async def shown_to(ctx: UserContext, run: dict[str, Any], item: ActionItemInfo) -> ActionItemInfo:
    """An item of someone else's run as an auditor sees it: what, where, its status and who decided it, and its
    values (proposed changes, the record before, the raw entry, the reason) only when the auditor may read
    the record itself, by the one visibility rule (records.visibility), as any member would."""
    if await may_read_values(ctx, run, item):
        return item
    withheld = {"changes": {}, "before": None, "raw": None, "reason": VALUES_WITHHELD}
    return item.model_copy(update={**withheld, "values_withheld": True})


async def _visible_item(ctx: UserContext, item_id: int) -> dict[str, Any]:
    """An item of a run the caller may see (the requester's own, or any for an admin); else 404."""
    row = (
        await ActionItem.select()
        .where((ActionItem.id == item_id) & (ActionItem.company == ctx.company_id))
        .output(load_json=True)
        .first()
    )
    if row is None:
        raise NotFound(f"no action item {item_id}")
    await get_run_row(ctx, row["run"])
    return row


async def _item_for(ctx: UserContext, item_id: int) -> dict[str, Any]:
    """A pending item the caller may decide: the run's requester or a company admin."""
    row = await _visible_item(ctx, item_id)
    if row["status"] != ItemStatus.pending:
        raise Conflict(f"action item {item_id} is already {row['status']}")
    return row


async def _decide(
    item_id: int, status: ItemStatus, ctx: UserContext, problem: str | None = None, **extra: Any
) -> None:
    """Decide a pending item. Conditional on it still being pending, so of two concurrent decisions exactly
    one lands; the other gets 409 (and, inside the caller's transaction, rolls back whatever it began)."""
    values = {
        ActionItem.status: status,
        ActionItem.decided_by: ctx.email,
        ActionItem.decided_at: clock.now(),
        ActionItem.problem: problem,
    }
    for key, value in extra.items():
        values[getattr(ActionItem, key)] = value
    await decisions.claim(
        ActionItem,
        item_id,
        values,
        status=ActionItem.status,
        waiting=ItemStatus.pending,
        lost=f"action item {item_id} was decided meanwhile; nothing was written",
    )


async def accept(ctx: UserContext, item_id: int) -> ActionItemInfo:
    ctx.require_person("accepting a proposed change")
    row = await _item_for(ctx, item_id)
    entry = {"op": row["op"], "dataset": row["dataset"], "changes": row["changes"], "reason": row["reason"]}
    if row["op"] == "update":
        entry["record_id"] = row["record_id"]
    dataset = await find_dataset(ctx.company_id, row["dataset"])
    try:
        if dataset is None:
            raise ItemProblem(f"the dataset {row['dataset']!r} no longer exists")
        parsed = parse_entry(entry, dataset)  # writable fields and value types, again
        # the decider's edit permission and the record's visibility (a new key for a create), now
        await _check_permission(ctx, parsed, dataset)
        run = (
            await Run.select(Run.id, Run.datasets).where(Run.id == row["run"]).output(load_json=True).first()
        )
        await _check_bounds(ctx, run, parsed)  # the run's scope, and references inside the company, now
    except ItemProblem as exc:
        await audit.record(
            "action.refused",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="action_item",
            subject_id=item_id,
            data={"run_id": row["run"], "problem": str(exc)},
        )
        raise Forbidden(f"not applied: {exc}") from exc
    if not dataset.builtin:
        created = await _accept_defined(ctx, row, dataset)
        return await _accepted(ctx, item_id, row, created)
    values = {getattr(dataset.table, f): coerce(dataset, f, v) for f, v in row["changes"].items()}
    now = clock.now()
    table = dataset.table
    if row["op"] == "update":
        async with ActionItem._meta.db.transaction():
            # claim the item first (a write, so SQLite serialises the two writers instead of failing one)
            await _decide(item_id, ItemStatus.accepted, ctx)
            values[table.version] = row["staged_version"] + 1
            values[table.updated_at] = now
            written = (
                await table.update(values)
                .where((table.id == row["record_id"]) & (table.version == row["staged_version"]))
                .returning(table.id)
            )
            conflict = not written
            if conflict:
                current = await table.select(table.version).where(table.id == row["record_id"]).first()
                found = current["version"] if current else "deleted"
                problem = (
                    f"the record changed since it was staged (staged version {row['staged_version']}, now {found}); "
                    "nothing was written"
                )
                await ActionItem.update(
                    {ActionItem.status: ItemStatus.conflict, ActionItem.problem: problem}
                ).where(ActionItem.id == item_id)
        if conflict:
            await audit.record(
                "action.conflict",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="action_item",
                subject_id=item_id,
                data={"run_id": row["run"], "dataset": row["dataset"], "record_id": row["record_id"]},
            )
            raise Conflict(problem)
        created = None
    else:
        record = table(
            company=ctx.company_id,
            owner=ctx.user_id,
            team=min(ctx.team_ids) if ctx.team_ids else None,
            visibility="team" if ctx.team_ids else "private",
            created_at=now,
            updated_at=now,
            version=1,
        )
        for column, value in values.items():
            setattr(record, column._meta.name, value)
        async with ActionItem._meta.db.transaction():
            await _decide(
                item_id, ItemStatus.accepted, ctx
            )  # first: a second accept stops here and creates nothing
            await record.save()
            created = record.id
            await ActionItem.update({ActionItem.created_record_id: created}).where(ActionItem.id == item_id)
    return await _accepted(ctx, item_id, row, created)


async def _conflict(ctx: UserContext, item_id: int, row: dict[str, Any], found: Any) -> Conflict:
    problem = (
        f"the record changed since it was staged (staged version {row['staged_version']}, now {found}); "
        "nothing was written"
    )
    await ActionItem.update({ActionItem.status: ItemStatus.conflict, ActionItem.problem: problem}).where(
        ActionItem.id == item_id
    )
    return Conflict(problem)


async def _accept_defined(ctx: UserContext, row: dict[str, Any], dataset: AnyDataset) -> int | None:
    """An accepted change to a company-defined dataset's row: the same claim, version check and ownership
    of a created row as a built-in's, the values merged into the row's JSON."""
    item_id = row["id"]
    changes = {f: to_json(coerce(dataset, f, v)) for f, v in row["changes"].items()}
    table = record_tables.DatasetRow
    now = clock.now()
    if row["op"] == "update":
        error: Conflict | None = None
        async with ActionItem._meta.db.transaction():
            await _decide(item_id, ItemStatus.accepted, ctx)
            current = (
                await table.select(table.values, table.version)
                .where((table.id == row["record_id"]) & (table.dataset == dataset.id))
                .first()
            )
            if current is None or current["version"] != row["staged_version"]:
                error = await _conflict(ctx, item_id, row, current["version"] if current else "deleted")
            else:
                values = current["values"]
                merged = {**(json.loads(values) if isinstance(values, str) else values or {}), **changes}
                update: dict[Any, Any] = {
                    table.values: json.dumps(merged),
                    table.version: row["staged_version"] + 1,
                    table.updated_at: now,
                }
                if dataset.key_column in changes:
                    update[table.external_key] = str(changes[dataset.key_column])
                written = (
                    await table.update(update)
                    .where((table.id == row["record_id"]) & (table.version == row["staged_version"]))
                    .returning(table.id)
                )
                if not written:
                    error = await _conflict(ctx, item_id, row, "changed meanwhile")
        if error is not None:
            await audit.record(
                "action.conflict",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="action_item",
                subject_id=item_id,
                data={"run_id": row["run"], "dataset": row["dataset"], "record_id": row["record_id"]},
            )
            raise error
        return None
    key = await _new_key(dataset, row["changes"])
    async with ActionItem._meta.db.transaction():
        await _decide(item_id, ItemStatus.accepted, ctx)  # first: a second accept stops here
        created = (
            await table.insert(
                table(
                    company=ctx.company_id,
                    dataset=dataset.id,
                    external_key=key,
                    owner=ctx.user_id,
                    team=min(ctx.team_ids) if ctx.team_ids else None,
                    visibility="team" if ctx.team_ids else "private",
                    values=json.dumps(changes),
                    created_at=now,
                    updated_at=now,
                    version=1,
                )
            ).returning(table.id)
        )[0]["id"]
        await ActionItem.update({ActionItem.created_record_id: created}).where(ActionItem.id == item_id)
    return created


async def _accepted(
    ctx: UserContext, item_id: int, row: dict[str, Any], created: int | None
) -> ActionItemInfo:
    await audit.record(
        "action.accepted",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="action_item",
        subject_id=item_id,
        data={
            "run_id": row["run"],
            "op": row["op"],
            "dataset": row["dataset"],
            "record_id": row["record_id"] or created,
            "changes": row["changes"],
        },
    )
    return await get_item(ctx, item_id)


async def reject(ctx: UserContext, item_id: int, reason: str | None = None) -> ActionItemInfo:
    ctx.require_person("rejecting a proposed change")
    row = await _item_for(ctx, item_id)
    await _decide(item_id, ItemStatus.rejected, ctx, (reason or "").strip()[:2000] or None)
    await audit.record(
        "action.rejected",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="action_item",
        subject_id=item_id,
        data={"run_id": row["run"], "reason": reason or ""},
    )
    return await get_item(ctx, item_id)


async def get_item(ctx: UserContext, item_id: int) -> ActionItemInfo:
    row = await _visible_item(ctx, item_id)
    run = (
        await Run.select(Run.narrowed_from, Run.flow_id, Run.flow_step, Run.requested_by)
        .where(Run.id == row["run"])
        .first()
    )
    return await shown_to(ctx, run, item_payload(row, run))
