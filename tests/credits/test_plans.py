"""Plans and pools belong to the operator. The adversary beside the control: a company admin raising their
own pool (or changing their plan) is refused 403 and the refusal is audited / the operator's CLI puts the
company on a plan and tops its pool up, audited. An admin's limits are set within the pool (never above it)
and hold runs to them. The pool resets with the period: last month's charges and top-ups do not count. On
SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from backend.audit.tables import AuditEntry
from backend.cli import app
from backend.credits import operator
from backend.credits import service as credits
from backend.credits.platform import token_key
from backend.credits.tables import CreditTopUp, PlatformCharge
from backend.settings import get_settings
from backend.tenancy.tables import Company, User
from tests.support.credits import LIMITS, MAX_COST
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal


async def _acme() -> dict[str, Any]:
    return await Company.select().where(Company.name == "Acme Analytics").first()


async def _cli(monkeypatch: pytest.MonkeyPatch, url: str, *argv: str) -> Any:
    """`cleanroom ARGV…` against the test's database, as the operator runs it (its own event loop)."""
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        return await asyncio.to_thread(CliRunner().invoke, app, list(argv))
    finally:
        get_settings.cache_clear()


async def test_an_admin_raising_the_pool_is_refused_and_audited(client) -> None:
    before = await _acme()
    await login(client, "admin@acme.example")
    for change in (
        {"credit_pool": 1_000_000},
        {"plan": "business"},
        {"credit_pool": 5, "flow_action_cap": 3},
    ):
        r = await client.patch("/api/company/settings", json=change)
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "operator_only"
    after = await _acme()
    assert (after["credit_pool"], after["plan"], after["flow_action_cap"]) == (
        before["credit_pool"],
        before["plan"],
        before["flow_action_cap"],
    )
    refusals = (
        await AuditEntry.select().where(AuditEntry.action == "settings.refused").order_by(AuditEntry.seq)
    )
    assert len(refusals) == 3
    assert refusals[0]["actor"] == "admin@acme.example" and refusals[0]["company_id"] == before["id"]
    data = refusals[0]["data"]
    data = data if isinstance(data, dict) else json.loads(data)
    assert data["asked"] == {"credit_pool": 1_000_000} and data["auth"] == "session"
    # control: the admin's other settings still change
    r = await client.patch("/api/company/settings", json={"flow_action_cap": 3})
    assert r.status_code == 200 and r.json()["flow_action_cap"] == 3


async def test_the_operators_cli_sets_plans_assigns_them_and_tops_up(client, demo_db, monkeypatch) -> None:
    acme = await _acme()
    done = await _cli(monkeypatch, demo_db, "plans", "set", "pro", "30000")
    assert done.exit_code == 0, done.output
    done = await _cli(monkeypatch, demo_db, "plans", "assign", "Acme Analytics", "pro")
    assert done.exit_code == 0, done.output
    row = await _acme()
    assert (row["plan"], row["credit_pool"]) == ("pro", 30000)
    done = await _cli(monkeypatch, demo_db, "plans", "list", "--json")
    assert done.exit_code == 0 and '"pro": 30000' in done.output
    done = await _cli(
        monkeypatch, demo_db, "credits", "top-up", "Acme Analytics", "500", "--reason", "launch week"
    )
    assert done.exit_code == 0, done.output
    assert await credits.pool(acme["id"]) == 30500
    await login(client, "admin@acme.example")
    usage = (await client.get("/api/credits")).json()
    assert (usage["pool"], usage["plan"], usage["plan_credits"], usage["top_ups"]) == (
        30500,
        "pro",
        30000,
        500,
    )
    actions = {e["action"]: e for e in await AuditEntry.select().where(AuditEntry.company_id == acme["id"])}
    assert actions["credits.plan_assigned"]["actor"].startswith("cli:")
    assert "launch week" in str(actions["credits.topped_up"]["data"])
    done = await _cli(monkeypatch, demo_db, "plans", "set", "pro", "40000")  # the companies on it follow
    assert done.exit_code == 0, done.output
    assert (await _acme())["credit_pool"] == 40000
    done = await _cli(monkeypatch, demo_db, "credits", "top-up", "Acme Analytics", "5")  # no reason
    assert done.exit_code != 0
    done = await _cli(monkeypatch, demo_db, "plans", "assign", "Acme Analytics", "nonesuch")
    assert done.exit_code != 0 and (await _acme())["plan"] == "pro"


async def test_the_platform_credential_commands(client, demo_db, monkeypatch) -> None:
    done = await _cli(monkeypatch, demo_db, "platform", "token", "create", "chat")  # no scope: refused
    assert done.exit_code != 0 and "--all-companies" in done.output
    done = await _cli(
        monkeypatch, demo_db, "platform", "token", "create", "chat", "--company", "Acme Analytics"
    )
    assert done.exit_code == 0, done.output
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("cpt_")
    body = {"company": "Acme Analytics", "user": "bob@acme.example", "credits": 1, "idempotency_key": "cli-1"}
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.post("/api/platform/charges", json=body, headers=headers)).status_code == 200
    listed = await _cli(monkeypatch, demo_db, "platform", "token", "list")
    assert done.exit_code == 0 and "chat" in listed.output and token not in listed.output
    assert "charges Acme Analytics" in listed.output
    token_id = listed.output.split()[0]
    globex = {**body, "company": "Globex", "user": "gina@globex.example", "idempotency_key": "cli-g"}
    assert (await client.post("/api/platform/charges", json=globex, headers=headers)).status_code == 404
    done = await _cli(
        monkeypatch,
        demo_db,
        "platform",
        "token",
        "scope",
        token_id,
        "--company",
        "Acme Analytics",
        "--company",
        "Globex",
    )
    assert done.exit_code == 0 and "charges Acme Analytics, Globex" in done.output, done.output
    assert (await client.post("/api/platform/charges", json=globex, headers=headers)).status_code == 200
    done = await _cli(monkeypatch, demo_db, "platform", "token", "revoke", token_id)
    assert done.exit_code == 0, done.output
    body["idempotency_key"] = "cli-2"
    assert (await client.post("/api/platform/charges", json=body, headers=headers)).status_code == 401
    assert (
        await AuditEntry.count().where(
            AuditEntry.action.is_in(
                ["platform.token_created", "platform.token_scoped", "platform.token_revoked"]
            )
        )
        == 3
    )


async def test_last_periods_charges_and_top_ups_do_not_count(client) -> None:
    acme = await _acme()
    start = credits.period_start()
    alice = await User.select(User.id).where(User.email == "alice@acme.example").first()
    used = await credits.used(acme["id"])
    await operator.top_up("Acme Analytics", 700, reason="last month", actor="cli:test")
    await PlatformCharge.insert(
        PlatformCharge(
            company=acme["id"],
            user=alice["id"],
            kind="chat_turn",
            credits=50,
            idempotency_key="old",
            token_key=token_key(0, "old"),
            at=start - timedelta(seconds=1),
        )
    )
    await CreditTopUp.update({CreditTopUp.at: start - timedelta(seconds=1)}).where(
        CreditTopUp.company == acme["id"]
    )
    assert await credits.used(acme["id"]) == used
    assert await credits.pool(acme["id"]) == acme["credit_pool"]
    await operator.top_up("Acme Analytics", 300, reason="this month", actor="cli:test")  # control
    assert await credits.pool(acme["id"]) == acme["credit_pool"] + 300


@pytest.mark.parametrize(
    ("setting", "says"),
    [("credit_limit_per_person", "credits a person"), ("credit_limit_per_day", "credits a day")],
)
async def test_an_admins_limits_are_within_the_pool_and_hold_runs_to_them(
    client, setting: str, says: str
) -> None:
    await enable_code()
    acme = await _acme()
    await login(client, "admin@acme.example")
    r = await client.patch("/api/company/settings", json={setting: acme["credit_pool"] + 1})
    assert r.status_code == 422, r.text  # above the pool: refused
    bob = await User.select(User.id).where(User.email == "bob@acme.example").first()
    if setting == "credit_limit_per_person":
        spent = await credits.charges(acme["id"], credits.period_start(), bob["id"])
    else:
        spent = await credits.charges(
            acme["id"], datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        )
    limit = math.ceil(sum(c["credits"] for c in spent) + MAX_COST * 1.5)  # one run's maximum fits, not two
    r = await client.patch("/api/company/settings", json={setting: limit})
    assert r.status_code == 200 and r.json()[setting] == limit
    client.cookies.clear()
    bob_token = await token_for(client, "bob@acme.example")
    runs = []
    for k in range(2):
        r = await client.post("/api/runs", json=proposal(title=f"r{k}", limits=LIMITS), headers=bob_token)
        assert r.status_code == 201, r.text
        runs.append(r.json())
    await login(client, "bob@acme.example")
    answers = [
        await client.post(
            f"/api/runs/{run['id']}/approve",
            json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
        )
        for run in runs
    ]
    assert answers[0].status_code == 200, answers[0].text  # control: within the limit
    assert answers[1].status_code == 402, answers[1].text
    assert answers[1].json()["error"] == "credit_limit"
    assert f"limit of {limit} {says}" in answers[1].json()["detail"]
