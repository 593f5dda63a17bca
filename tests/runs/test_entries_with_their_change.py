"""An audit entry and the change of state it records land in one transaction (review 2026-12-06, the "L12
audit gaps" row): an item's acceptance or rejection, a company's settings and a fleet run's start. The
hostile case is a failure after the change, while its entry is written (the trail's disk fills): neither
lands, so the trail never misses a change that happened. Control: with the trail writable, both land.
SQLite and PostgreSQL alike (on PostgreSQL the entries are inserted at the transaction's end)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from backend.actions import service as actions
from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.fleet import service as fleet
from backend.records.datasets import DATASETS
from backend.runs.tables import Run, RunStatus
from backend.tenancy import service as tenancy
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company
from tests.support.runs import proposal

ALICE = "alice@acme.example"
ADMIN = "admin@acme.example"


async def _entries(action: str, subject_id: Any) -> int:
    return await AuditEntry.count().where(
        (AuditEntry.action == action) & (AuditEntry.subject_id == str(subject_id))
    )


async def _fails_then_lands(
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[], Awaitable[Any]],
    state: Callable[[], Awaitable[Any]],
    action: str,
    subject_id: Any,
) -> None:
    """`change` with the trail failing: it raises, and neither its state nor its entry moved; then with the
    trail writable: both did."""
    before, entries = await state(), await _entries(action, subject_id)
    real = audit._append

    async def failing_append(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk filled while the entry was written")

    monkeypatch.setattr(audit, "_append", failing_append)
    with pytest.raises(RuntimeError):
        await change()
    monkeypatch.setattr(audit, "_append", real)
    assert await state() == before  # the change rolled back with its entry
    assert await _entries(action, subject_id) == entries
    await change()  # control
    assert await state() != before
    assert await _entries(action, subject_id) == entries + 1


async def _run_with_items(client: Any, alice: dict[str, str]) -> tuple[int, int, list[int]]:
    """Alice's run over deals, with two pending updates of a deal she sees: (company, the deal, the items)."""
    run = (await client.post("/api/runs", json=proposal(code="print(1)\n"), headers=alice)).json()
    company = (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"]
    deals = DATASETS["deals"].table
    deal = (
        await deals.select(deals.id, deals.version)
        .where((deals.company == company) & (deals.visibility == "company"))
        .first()
    )
    items = []
    for index, probability in enumerate((80, 10)):
        item = ActionItem(
            company=company,
            run=run["id"],
            index=index,
            op="update",
            dataset="deals",
            record_id=deal["id"],
            changes={"probability": probability},
            before={"probability": None},
            staged_version=deal["version"],
            reason="",
            status="pending",
        )
        await item.save()
        items.append(item.id)
    return company, deal["id"], items


async def test_an_items_decision_and_its_entry_land_together(client, alice, acme_on, monkeypatch) -> None:
    _, deal_id, (accepted, rejected) = await _run_with_items(client, alice)
    ctx = await load_user_context_by_email(ALICE)
    deals = DATASETS["deals"].table

    async def accept_state() -> Any:
        item = await ActionItem.select(ActionItem.status).where(ActionItem.id == accepted).first()
        record = await deals.select(deals.version).where(deals.id == deal_id).first()
        return item["status"], record["version"]

    await _fails_then_lands(
        monkeypatch, lambda: actions.accept(ctx, accepted), accept_state, "action.accepted", accepted
    )

    async def reject_state() -> Any:
        return (await ActionItem.select(ActionItem.status).where(ActionItem.id == rejected).first())["status"]

    await _fails_then_lands(
        monkeypatch, lambda: actions.reject(ctx, rejected, "no"), reject_state, "action.rejected", rejected
    )


async def test_settings_and_a_fleet_runs_start_land_with_their_entries(
    client, alice, acme_on, monkeypatch
) -> None:
    run = (await client.post("/api/runs", json=proposal(code="print(1)\n"), headers=alice)).json()
    await Run.update({Run.status: RunStatus.running, Run.host_id: "host-a"}).where(Run.id == run["id"])

    async def started() -> Any:
        return (await Run.select(Run.vm_started_at).where(Run.id == run["id"]).first())["vm_started_at"]

    await _fails_then_lands(
        monkeypatch, lambda: fleet.vm_started("host-a", run["id"]), started, "run.started", run["id"]
    )

    admin = await load_user_context_by_email(ADMIN)

    async def setting() -> Any:
        company = Company.select(Company.code_execution_enabled).where(Company.id == admin.company_id)
        return (await company.first())["code_execution_enabled"]

    await _fails_then_lands(
        monkeypatch,
        lambda: tenancy.update_company_settings(admin, {"code_execution_enabled": False}),
        setting,
        "settings.changed",
        admin.company_id,
    )
