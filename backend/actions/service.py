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
from backend.records.visibility import find_dataset, unreadable_sources, visible_record
from backend.runs.read import get_run_row, withheld_reason
from backend.runs.sources import run_sources
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
    key_column = dataset.key_column  # type: ignore[union-attr]
    value = changes.get(key_column)
    if value is None or value == "":
        raise ItemProblem(f"a new {dataset.name} record needs its key column {key_column}")
    key = str(to_json(coerce(dataset, key_column, value)))
    table = record_tables.DatasetRow
    if await table.exists().where((table.dataset == dataset.id) & (table.external_key == key)):
        raise ItemProblem(f"{dataset.name} already has a record with {key_column} {key!r}")
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


async def ingest(
    run: dict[str, Any], entries: list[Any], requester: UserContext, counts: dict[str, int] | None = None
) -> int:
    """Turn a run's actions.json, as the sandbox parsed it, into items; returns how many. The sandbox
    rejects a file over `actions_cap()` whole, so no part of one ever becomes items here either. `counts`
    (optional) gets `pending`: how many wait for a decision (the others are invalid)."""
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
        if counts is not None and item["status"] == ItemStatus.pending:
            counts["pending"] = counts.get("pending", 0) + 1
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
    unreadable = unreadable_sources(ctx, await run_sources(run))
    return [await shown_to(ctx, run, item_payload(r, run), unreadable) for r in rows]


VALUES_WITHHELD = "withheld: an auditor sees this change's values only when they may read the record"


async def values_withheld(
    ctx: UserContext, run: dict[str, Any], item: ActionItemInfo, unreadable: list[str] | None = None
) -> str | None:
    """Why `ctx` does not see an item's values (proposed changes, the record before, the raw entry, the
    reason), or None. They are what the run that proposed them computed, so first the rule its printed output
    follows: `unreadable_sources` of the run's sources (`unreadable`, when the caller read them already); a
    requester who lost a permission sees their old items' values no more. Then, for an auditor on someone
    else's run, the record itself, by the one visibility rule (records.visibility), as any member would."""
    if unreadable is None:
        unreadable = unreadable_sources(ctx, await run_sources(run))
    if unreadable:
        return withheld_reason(unreadable)
    if not ctx.is_auditor or run["requested_by"] == ctx.user_id:
        return None
    record_id = item.record_id if item.op == "update" else item.created_record_id
    dataset = await find_dataset(ctx.company_id, item.dataset) if item.dataset else None
    readable = dataset is not None and ctx.can(dataset.name) and record_id is not None
    if readable and await visible_record(ctx, dataset, record_id, dataset.table.id):  # type: ignore[arg-type]
        return None
    return VALUES_WITHHELD


async def may_read_values(ctx: UserContext, run: dict[str, Any], item: ActionItemInfo) -> bool:
    """Whether `ctx` sees an item's values (`values_withheld`). The audit export asks this too, for the
    entries about an item."""
    return await values_withheld(ctx, run, item) is None


async def shown_to(
    ctx: UserContext, run: dict[str, Any], item: ActionItemInfo, unreadable: list[str] | None = None
) -> ActionItemInfo:
    """An item as `ctx` sees it: what, where, its status and who decided it, and its values only when
    `values_withheld` says nothing."""
    why = await values_withheld(ctx, run, item, unreadable)
    if why is None:
        return item
    return _withheld_item(item, why)


def _withheld_item(item: ActionItemInfo, reason: str) -> ActionItemInfo:
    withheld = {"changes": {}, "before": None, "raw": None, "reason": reason}
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
            await Run.select(Run.id, *ITEM_RUN_COLUMNS)
            .where(Run.id == row["run"])
            .output(load_json=True)
            .first()
        )
        await _check_bounds(ctx, run, parsed)  # the run's scope, and references inside the company, now
        if unreadable := unreadable_sources(ctx, await run_sources(run)):  # its values are withheld from them
            raise ItemProblem(withheld_reason(unreadable))
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
    coerced = {f: coerce(dataset, f, v) for f, v in row["changes"].items()}
    now = clock.now()
    table = dataset.table
    accepted = {
        "run_id": row["run"],
        "op": row["op"],
        "dataset": row["dataset"],
        "record_id": row["record_id"],
        "changes": row["changes"],
    }
    if row["op"] == "update":
        # the decision, the write and its entry (`action.accepted`, or `action.conflict`) in one transaction
        async with audit.atomic():
            # claim the item first (a write, so SQLite serialises the two writers instead of failing one)
            await _decide(item_id, ItemStatus.accepted, ctx)
            conflict = not await _write_update(dataset, row, coerced, now)
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
                await audit.record(
                    "action.conflict",
                    actor=ctx.actor,
                    company_id=ctx.company_id,
                    subject_type="action_item",
                    subject_id=item_id,
                    data={"run_id": row["run"], "dataset": row["dataset"], "record_id": row["record_id"]},
                )
            else:
                await _record_accepted(ctx, item_id, accepted)
        if conflict:
            raise Conflict(problem)
    else:
        key = None if dataset.builtin else await _new_key(dataset, row["changes"])
        async with audit.atomic():  # the decision, the new record and `action.accepted` land together
            await _decide(
                item_id, ItemStatus.accepted, ctx
            )  # first: a second accept stops here and creates nothing
            created = await _write_create(ctx, dataset, coerced, key, now)
            await ActionItem.update({ActionItem.created_record_id: created}).where(ActionItem.id == item_id)
            await _record_accepted(ctx, item_id, {**accepted, "record_id": created})
    return await get_item(ctx, item_id)


async def _write_update(dataset: AnyDataset, row: dict[str, Any], coerced: dict[str, Any], now: Any) -> bool:
    """The accepted change written only while the record is at the staged version; whether it was. A
    company-defined row's changed values are merged into its JSON (and its key follows its key column)."""
    table = dataset.table
    where = (table.id == row["record_id"]) & (table.version == row["staged_version"])
    values: dict[Any, Any] = {table.version: row["staged_version"] + 1, table.updated_at: now}
    if dataset.builtin:
        values.update({getattr(table, f): v for f, v in coerced.items()})
    else:
        where = where & (table.dataset == dataset.id)
        current = await table.select(table.values).where(where).first()
        if current is None:
            return False
        stored = current["values"]
        stored = json.loads(stored) if isinstance(stored, str) else (stored or {})
        changes = {f: to_json(v) for f, v in coerced.items()}
        values[table.values] = json.dumps(dict(sorted({**stored, **changes}.items())))
        key_column = dataset.key_column  # type: ignore[union-attr]
        if key_column in changes:
            values[table.external_key] = str(changes[key_column])
    return bool(await table.update(values).where(where).returning(table.id))


async def _write_create(
    ctx: UserContext, dataset: AnyDataset, coerced: dict[str, Any], key: str | None, now: Any
) -> int:
    """A created record, owned as every created record is: by the decider, in their first team."""
    table = dataset.table
    owned = {
        "company": ctx.company_id,
        "owner": ctx.user_id,
        "team": min(ctx.team_ids) if ctx.team_ids else None,
        "visibility": "team" if ctx.team_ids else "private",
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    if dataset.builtin:
        record = table(**owned)
        for field, value in coerced.items():
            setattr(record, field, value)
        await record.save()
        return record.id
    values = json.dumps(dict(sorted({f: to_json(v) for f, v in coerced.items()}.items())))
    record = table(**owned, dataset=dataset.id, external_key=key, values=values)
    return (await table.insert(record).returning(table.id))[0]["id"]


async def _record_accepted(ctx: UserContext, item_id: int, data: dict[str, Any]) -> None:
    """`action.accepted`, inside the transaction of the decision and the write it records."""
    await audit.record(
        "action.accepted",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="action_item",
        subject_id=item_id,
        data=data,
    )


async def reject(ctx: UserContext, item_id: int, reason: str | None = None) -> ActionItemInfo:
    ctx.require_person("rejecting a proposed change")
    row = await _item_for(ctx, item_id)
    async with audit.atomic():  # the decision and `action.rejected` land together, or neither
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
    run = await Run.select(*ITEM_RUN_COLUMNS).where(Run.id == row["run"]).output(load_json=True).first()
    unreadable = unreadable_sources(ctx, await run_sources(run))
    return await shown_to(ctx, run, item_payload(row, run), unreadable)


# what an item shows of its run, and what the run's sources are read from (runs.sources.run_sources)
ITEM_RUN_COLUMNS = (
    Run.narrowed_from,
    Run.flow_id,
    Run.flow_step,
    Run.requested_by,
    Run.company,
    Run.datasets,
    Run.file_ids,
    Run.source_datasets,
)
