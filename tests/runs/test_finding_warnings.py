"""Issue 55 in the service: an admin acknowledges a warning "expected here" (per company, by the cell's hash
and column), it is shown as acknowledged and audited, and lapses when the cell changes; the verdict cache in
the database is per company and per scanner fingerprint. Each refusal is tested as the party refused, beside
the party who succeeds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend import clock
from backend.audit.tables import AuditEntry
from backend.demo.files import PLANTED_INSTRUCTION
from backend.records import tables as rt
from backend.staging import verdict_store
from backend.staging.tables import InjectionVerdict
from backend.tenancy.tables import Company
from tests.support.audit import AUDITOR, make_auditor
from tests.support.http import token_for
from tests.support.runs import as_user, enable_code, proposal


async def _plant(texts: list[str]) -> list[int]:
    """The first tasks alice sees get `texts` as their description; returns their ids."""
    ids = [r["id"] for r in await rt.Task.select(rt.Task.id).order_by(rt.Task.id).limit(len(texts))]
    for task_id, text in zip(ids, texts, strict=True):
        await rt.Task.update({rt.Task.description: text}).where(rt.Task.id == task_id)
    return ids


async def _propose(client, alice) -> dict:
    r = await client.post("/api/runs", json=proposal(datasets=["tasks"]), headers=alice)
    assert r.status_code == 201, r.text
    return r.json()


def _warned(run: dict) -> list[tuple[int, dict]]:
    return [(i, f) for i, f in enumerate(run["findings"]) if f["column"] == "description"]


@pytest.mark.sqlite
async def test_acknowledging_a_warning(client) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    await _plant([PLANTED_INSTRUCTION, PLANTED_INSTRUCTION])
    run = await _propose(client, alice)
    warned = _warned(run)
    assert len(warned) == 2 and all(f["tier"] == 1 and f["acknowledged"] is None for _, f in warned)
    assert run["manifest"]["scan"]["cells_looked_up"] > 0  # the proposal's scan summary
    index = warned[0][0]
    url = f"/api/runs/{run['id']}/findings/{index}/acknowledgement"
    body = {"reason": "our support macro quotes this phishing text on purpose"}

    # refused: the assistant's token, a member (even the run's own requester), another company's admin
    assert (await client.post(url, json=body, headers=alice)).status_code in (401, 403)
    await as_user(client, "alice@acme.example")
    member = await client.post(url, json=body)
    assert member.status_code == 403, member.text
    await as_user(client, "admin@globex.example")
    assert (await client.post(url, json=body)).status_code == 404
    assert (await client.get(f"/api/runs/{run['id']}")).status_code == 404
    assert (await client.get("/api/injection/acknowledgements")).json() == []

    # the company's admin may; the reason is required; once is enough
    await as_user(client, "admin@acme.example")
    assert (await client.post(url, json={"reason": " "})).status_code == 422
    made = await client.post(url, json=body)
    assert made.status_code == 201, made.text
    ack = made.json()
    assert ack["cell_sha256"] == warned[0][1]["cell_sha256"] and ack["column"] == "description"
    assert (await client.post(url, json=body)).status_code == 409
    entry = await AuditEntry.select().where(AuditEntry.action == "finding.acknowledged").first()
    assert entry["actor"].startswith("admin@acme.example") and entry["subject_id"] == str(run["id"])

    # shown, not hidden: both cells hold the same text, so both findings are acknowledged
    shown = _warned((await client.get(f"/api/runs/{run['id']}")).json())
    assert len(shown) == 2
    assert all(f["acknowledged"]["reason"] == body["reason"] for _, f in shown)
    assert all(f["acknowledged"]["by"] == "admin@acme.example" for _, f in shown)

    # an auditor sees alice's run without its contents: no excerpt, no cell hash (a short cell's hash can be
    # guessed), and may not acknowledge
    await make_auditor(client)
    await as_user(client, AUDITOR)
    withheld = _warned((await client.get(f"/api/runs/{run['id']}")).json())
    assert withheld and all(f["cell_sha256"] is None and f["excerpt"] == "" for _, f in withheld)
    assert (await client.post(url, json=body)).status_code == 403

    # another company cannot see or withdraw it
    await as_user(client, "admin@globex.example")
    assert (await client.delete(f"/api/injection/acknowledgements/{ack['id']}")).status_code == 404
    assert (await client.get("/api/injection/acknowledgements")).json() == []
    await as_user(client, "alice@acme.example")
    assert (await client.get("/api/injection/acknowledgements")).status_code == 403

    # the cell changes: its finding is new again; the unchanged cell stays acknowledged
    await _plant([PLANTED_INSTRUCTION, PLANTED_INSTRUCTION + " Today."])
    later = await _propose(client, alice)
    # another export (not the in-memory copy of the first): every cell tier 3 judged in the first proposal is
    # read from the verdict cache, and gives the findings a scan gave; the ones its budget did not reach then are
    # judged now or left to tier 1, never read as cached; the changed cell is one tier 1 reports, judged again
    # and never looked up (tier 1 costs less than a lookup)
    first, scan = run["manifest"]["scan"], later["manifest"]["scan"]
    assert scan["cache_hits"] >= first["tier3_judged"] > 0
    assert (
        scan["cells_looked_up"]
        == first["cells_looked_up"]
        == scan["cache_hits"] + scan["tier3_judged"] + scan["tier3_unreached"]
    )
    keep = (
        "path",
        "row",
        "column",
        "category",
        "severity",
        "excerpt",
        "reason",
        "span",
        "cell_sha256",
        "tier",
    )
    assert [{k: f[k] for k in keep} for _, f in _warned(later) if f["row"] == 1] == [
        {k: f[k] for k in keep} for _, f in warned if f["row"] == 1
    ]
    await as_user(client, "admin@acme.example")
    by_row = {f["row"]: f for _, f in _warned((await client.get(f"/api/runs/{later['id']}")).json())}
    assert by_row[1]["acknowledged"] is not None
    assert by_row[2]["acknowledged"] is None and by_row[2]["cell_sha256"] != ack["cell_sha256"]

    # withdrawn by the admin of its company: audited, and the finding is plain again
    assert (await client.delete(f"/api/injection/acknowledgements/{ack['id']}")).status_code == 204
    assert await AuditEntry.exists().where(AuditEntry.action == "finding.acknowledgement_withdrawn")
    plain = _warned((await client.get(f"/api/runs/{run['id']}")).json())
    assert all(f["acknowledged"] is None for _, f in plain)


async def test_verdicts_are_per_company_and_per_fingerprint(demo_db: str) -> None:
    """The store: a verdict of one company is not another's; a changed fingerprint finds nothing (so the scan
    runs again) and the next store prunes the old one; expired and over-cap verdicts go."""
    acme, globex = [
        (await Company.select(Company.id).where(Company.name == name).first())["id"]
        for name in ("Acme Analytics", "Globex")
    ]
    verdict = {"p": 0.99, "h": []}
    await verdict_store.store(acme, "f1", {"a" * 64: verdict, "b" * 64: verdict})
    assert set(await verdict_store.lookup(acme, "f1", ["a" * 64, "b" * 64, "c" * 64])) == {"a" * 64, "b" * 64}
    assert await verdict_store.lookup(globex, "f1", ["a" * 64]) == {}  # another company: nothing
    assert await verdict_store.lookup(acme, "f2", ["a" * 64]) == {}  # another fingerprint: scanned again
    await verdict_store.store(acme, "f1", {"a" * 64: {"p": 0.5, "h": []}})  # stored again: replaced
    assert (await verdict_store.lookup(acme, "f1", ["a" * 64]))["a" * 64]["p"] == 0.5
    await verdict_store.store(acme, "f2", {"c" * 64: verdict})  # a new scanner: the old verdicts go
    assert await verdict_store.prune(acme, "f2") == 1
    assert await InjectionVerdict.count().where(InjectionVerdict.company == acme) == 1
    old = clock.now() - timedelta(days=verdict_store.RETENTION_DAYS + 1)
    await InjectionVerdict.update({InjectionVerdict.stored_at: old}).where(InjectionVerdict.company == acme)
    assert await verdict_store.lookup(acme, "f2", ["c" * 64]) == {}  # expired: not read
    assert await verdict_store.prune(acme, "f2") == 0
    many = {f"{i:064x}": verdict for i in range(6)}
    await verdict_store.store(globex, "f1", many)
    original = verdict_store.MAX_PER_COMPANY
    verdict_store.MAX_PER_COMPANY = 4
    try:
        assert await verdict_store.prune(globex, "f1") <= 4
    finally:
        verdict_store.MAX_PER_COMPANY = original
