"""Tenants see only themselves: system health shows a company its own runs, and a company admin's audit
verify reads and reports only their company's chain. The whole host and the whole chain are the
operator's, on the command line.

The hostile party is Globex's admin, curious about Acme (the other company in the demo seed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.tenancy.tables import Company
from tests.support.http import login
from tests.support.tenancy import LIBVIRT_ERROR, SECRET_PATH, _acme_runs, _fake_sandbox_health


async def _company_id(name: str) -> int:
    return (await Company.select(Company.id).where(Company.name == name).first())["id"]


@pytest.mark.sqlite  # what a company's health shows is decided by the app, not an engine's
async def test_health_shows_a_company_only_its_own_runs(client, monkeypatch) -> None:
    _fake_sandbox_health(monkeypatch)
    await _acme_runs(client, ["queued", "queued", "running"])
    await login(client, "admin@globex.example")
    globex = (await client.get("/api/system/health")).json()
    # Acme's runs are not Globex's business
    assert globex["queue_length"] == 0 and globex["running_runs"] == 0
    text = json.dumps(globex)
    for leak in (SECRET_PATH, "virtqemud", "acme-vm-17", "running_vms", "saved_state", "database"):
        assert leak not in text, leak
    assert globex["runner_ok"] is False and globex["virt_type"] == "kvm"  # only that something is wrong
    client.cookies.clear()
    await login(client, "admin@acme.example")
    acme = (await client.get("/api/system/health")).json()
    assert acme["queue_length"] == 2 and acme["running_runs"] == 1  # positive control: the counts are live


@pytest.mark.sqlite  # the operator's view, the app's (counts of runs, not an engine's)
async def test_the_operator_sees_the_whole_host(client, monkeypatch) -> None:
    from backend.system_controller import operator_health

    _fake_sandbox_health(monkeypatch)
    await _acme_runs(client, ["queued", "running"])
    info = await operator_health()
    assert info["queue_length"] == 1 and info["running_runs"] == 1
    assert info["image"]["path"] == SECRET_PATH and info["libvirt_error"] == LIBVIRT_ERROR


@pytest.mark.sqlite  # the CLI's keys, not an engine's
def test_cli_health_prints_the_global_view(demo_db: str, engine: str) -> None:
    env = dict(os.environ, DATABASE_URL=demo_db, CLEANROOM_LIBVIRT_URI="test:///default")
    done = subprocess.run(
        [sys.executable, "-m", "backend", "health", "--json"], env=env, capture_output=True, text=True
    )
    info = json.loads(done.stdout)
    assert {"queue_length", "running_runs", "image", "database"} <= set(info), done.stderr


async def _verify_as(client, email: str) -> dict:
    client.cookies.clear()
    await login(client, email)
    response = await client.post("/api/audit/verify")
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_company_admin_verifies_only_their_companys_chain(client) -> None:
    acme_id, globex_id = await _company_id("Acme Analytics"), await _company_id("Globex")
    await login(client, "admin@globex.example")
    await audit.record("test.event", actor="system", company_id=acme_id)  # Acme is busy meanwhile
    globex = (await client.post("/api/audit/verify")).json()
    own = await AuditEntry.select(AuditEntry.seq, AuditEntry.body_hash).where(
        AuditEntry.company_id == globex_id
    )
    assert globex["ok"] is True and globex["scope"] == "company"
    assert globex["checked"] == len(own) < await AuditEntry.count()  # no global count
    # the company chain's head: its newest entry's body hash, which names no global field
    assert globex["head_hash"] == max(own, key=lambda r: r["seq"])["body_hash"]
    global_head = await AuditEntry.select(AuditEntry.hash).order_by(AuditEntry.seq, ascending=False).first()
    assert globex["head_hash"] != global_head["hash"]  # not the table's
    assert set(globex) == {"ok", "scope", "checked", "first_bad_seq", "reason", "head_hash"}


# the chain's checks in Python over rows read back, which the test above reads on PostgreSQL too
@pytest.mark.sqlite
async def test_tampering_with_one_company_breaks_only_its_chain(client) -> None:
    acme_id = await _company_id("Acme Analytics")
    await _verify_as(client, "admin@globex.example")
    await _verify_as(client, "admin@acme.example")
    await audit.record("test.event", actor="system", company_id=acme_id, data={"n": 1})
    await audit.record("test.event", actor="system", company_id=acme_id, data={"n": 2})
    victim = (
        await AuditEntry.select()
        .where(AuditEntry.company_id == acme_id)
        .order_by(AuditEntry.seq, ascending=False)
        .offset(1)
        .first()
    )
    await AuditEntry.delete().where(AuditEntry.id == victim["id"])  # an Acme entry vanishes
    acme = await _verify_as(client, "admin@acme.example")
    assert acme["ok"] is False and "does not link" in acme["reason"]
    assert acme["first_bad_seq"] == victim["company_seq"] + 1  # the company's own numbering
    globex = await _verify_as(client, "admin@globex.example")
    assert globex["ok"] is True  # Globex's chain never reads Acme's entries


# the chain's checks in Python over rows read back, which the first verify test reads on PostgreSQL too
@pytest.mark.sqlite
async def test_an_altered_company_entry_is_named(client) -> None:
    acme_id = await _company_id("Acme Analytics")
    await _verify_as(client, "admin@acme.example")
    entry = await audit.record("test.event", actor="system", company_id=acme_id, data={"n": 1})
    await AuditEntry.update({AuditEntry.actor: "mallory@acme.example"}).where(AuditEntry.seq == entry["seq"])
    acme = await _verify_as(client, "admin@acme.example")
    assert (
        acme["ok"] is False and acme["first_bad_seq"] == entry["company_seq"] and "altered" in acme["reason"]
    )


@pytest.mark.sqlite  # who may call the route, not an engine's
async def test_members_still_cannot_verify(client) -> None:
    await login(client, "alice@acme.example")
    assert (await client.post("/api/audit/verify")).status_code == 403
