"""The assistant platform charges chat turns to the same pool runs draw on, with a credential of its own.

Each protection beside its control: a replayed idempotency key is not charged twice (the same answer comes
back) / a new key is charged; the platform's credential is refused on every other route / accepted on its
own; a person's session and an assistant's token are refused on the platform route; an unknown company or
person, or another company's person, is 404. A charge over what is left is still recorded, and the pool used
up by chat turns refuses run proposals and approvals saying so. On SQLite and PostgreSQL.

D-L4 (issue 52), as the party holding a leaked credential / a second platform: a credential scoped to Acme
charging Globex is refused like an unknown company (404, audited for the operator) / its own company is
charged; a credential made before scopes (none named) charges nobody until scoped; a charge past the overdraft
bound below zero is refused (402, audited, nothing recorded) / one within it is recorded; two credentials
sending the same idempotency key each get their own charge, and neither's 409 names the other's.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from backend.audit.tables import AuditEntry
from backend.credits import platform
from backend.credits import service as credits
from backend.credits.tables import PlatformCharge, PlatformToken, PlatformTokenCompany
from backend.settings import get_settings
from backend.tenancy.tables import Company
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal

CHARGES = "/api/platform/charges"


async def _acme() -> int:
    return (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]


async def _platform(
    *companies: str, all_companies: bool = False, name: str = "chat platform"
) -> dict[str, str]:
    made = await platform.create_token(
        name,
        created_by="cli:test",
        companies=list(companies or ([] if all_companies else ["Acme Analytics"])),
        all_companies=all_companies,
    )
    return {"Authorization": f"Bearer {made['token']}"}


def _turn(key: str, credits_: float = 2.5, **extra: Any) -> dict[str, Any]:
    return {
        "company": "Acme Analytics",
        "user": "alice@acme.example",
        "kind": "chat_turn",
        "credits": credits_,
        "idempotency_key": key,
        **extra,
    }


async def _charged(key: str) -> int:
    return await PlatformCharge.count().where(PlatformCharge.idempotency_key == key)


async def test_a_replayed_key_is_not_charged_twice_and_a_new_key_is(client) -> None:
    headers = await _platform()
    acme = await _acme()
    before = await credits.used(acme)
    first = await client.post(CHARGES, json=_turn("turn-1"), headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["kind"] == "chat_turn" and first.json()["credits"] == 2.5
    assert first.json()["email"] == "alice@acme.example"
    assert "idempotent-replayed" not in first.headers

    again = await client.post(CHARGES, json=_turn("turn-1"), headers=headers)  # the adversary: a replay
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert await _charged("turn-1") == 1
    assert await credits.used(acme) == pytest.approx(before + 2.5)

    new = await client.post(CHARGES, json=_turn("turn-2"), headers=headers)  # control: a new key
    assert new.status_code == 200, new.text
    assert new.json()["id"] != first.json()["id"]
    assert await credits.used(acme) == pytest.approx(before + 5.0)
    entries = await AuditEntry.select().where(AuditEntry.action == "credits.platform_charged")
    assert len(entries) == 2
    assert all(e["actor"].startswith("platform:chat platform (token ") for e in entries)
    assert {e["company_id"] for e in entries} == {acme}


async def test_the_same_key_sent_at_once_is_charged_once(client) -> None:
    headers = await _platform()
    answers = await asyncio.gather(
        *(client.post(CHARGES, json=_turn("burst"), headers=headers) for _ in range(5))
    )
    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    assert await _charged("burst") == 1


# the stored charge compared in Python; the key's uniqueness on PostgreSQL: the tests above and the two-
# credentials one
@pytest.mark.sqlite
async def test_a_key_reused_for_a_different_charge_is_409(client) -> None:
    headers = await _platform()
    assert (await client.post(CHARGES, json=_turn("k"), headers=headers)).status_code == 200
    r = await client.post(CHARGES, json=_turn("k", credits_=9), headers=headers)
    assert r.status_code == 409 and r.json()["error"] == "idempotency_conflict"
    assert await _charged("k") == 1


@pytest.mark.sqlite  # who is charged is looked up and checked by the app, not an engine's
async def test_unknown_company_or_person_or_another_companys_person_is_404(client) -> None:
    headers = await _platform(all_companies=True)  # Globex is in scope: its 404 is about alice
    for body in (
        _turn("a", company="Nobody Inc"),
        _turn("b", company=999_999),
        _turn("c", user="nobody@acme.example"),
        _turn("d", user="alice@acme.example", company="Globex"),  # alice is Acme's
    ):
        r = await client.post(CHARGES, json=body, headers=headers)
        assert r.status_code == 404, (body, r.text)
    assert await PlatformCharge.count() == 0
    acme = await _acme()  # control: by ids
    alice = (await client.get("/api/me", headers=await token_for(client, "alice@acme.example"))).json()["id"]
    r = await client.post(CHARGES, json=_turn("e", company=acme, user=alice), headers=headers)
    assert r.status_code == 200, r.text


@pytest.mark.sqlite  # the credential's scope, not an engine's
async def test_the_platform_credential_reaches_its_route_and_nothing_else(client) -> None:
    headers = await _platform()
    assert (await client.post(CHARGES, json=_turn("ok"), headers=headers)).status_code == 200  # control
    for method, path in (
        ("GET", "/api/credits"),
        ("GET", "/api/me"),
        ("GET", "/api/runs"),
        ("POST", "/api/runs"),
        ("PATCH", "/api/company/settings"),
        ("GET", "/api/audit"),
    ):
        r = await client.request(method, path, headers=headers, json={} if method != "GET" else None)
        assert r.status_code == 401, (method, path, r.status_code, r.text)


@pytest.mark.sqlite  # who may call the route, not an engine's
async def test_a_session_an_assistant_token_or_a_revoked_credential_is_refused_on_the_platform_route(
    client,
) -> None:
    assistant = await token_for(client, "admin@acme.example")
    r = await client.post(CHARGES, json=_turn("t1"), headers=assistant)
    assert r.status_code == 401, r.text
    await login(client, "admin@acme.example")  # a person's session (an admin's)
    r = await client.post(CHARGES, json=_turn("t2"))
    assert r.status_code == 401, r.text
    client.cookies.clear()
    made = await platform.create_token("old", created_by="cli:test", companies=["Acme Analytics"])
    headers = {"Authorization": f"Bearer {made['token']}"}
    assert (await client.post(CHARGES, json=_turn("t3"), headers=headers)).status_code == 200  # control
    await platform.revoke_token(made["id"], actor="cli:test")
    assert (await client.post(CHARGES, json=_turn("t4"), headers=headers)).status_code == 401
    assert await PlatformCharge.count() == 1
    stored = await platform.tokens()
    assert all(made["token"] not in str(row) for row in stored)  # only its hash is kept


async def _leave(credits_left: float) -> int:
    acme = await _acme()
    total = math.ceil(await credits.used(acme) + credits_left)
    await Company.update({Company.credit_pool: total}).where(Company.id == acme)
    return total


# the pool's arithmetic and the gate's message, the app's (the company's lock on PostgreSQL: the same key
# sent at once, tests/credits/test_company_lock)
@pytest.mark.sqlite
async def test_a_charge_over_what_is_left_is_recorded_and_chat_turns_used_up_the_pool(client) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    waiting = await client.post("/api/runs", json=proposal(title="before"), headers=alice)
    assert waiting.status_code == 201, waiting.text  # control: proposed while the pool had room
    await _leave(10)
    headers = await _platform()
    r = await client.post(CHARGES, json=_turn("big", credits_=25), headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["used_up"] is True and r.json()["remaining"] < 0
    assert await _charged("big") == 1
    entry = await AuditEntry.select().where(AuditEntry.action == "credits.platform_charged").first()
    assert entry is not None

    refused = await client.post("/api/runs", json=proposal(title="after"), headers=alice)
    assert refused.status_code == 402, refused.text
    assert "chat turns used it up" in refused.json()["detail"]
    await login(client, "alice@acme.example")
    run = waiting.json()
    r = await client.post(
        f"/api/runs/{run['id']}/approve",
        json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
    )
    assert r.status_code == 402, r.text
    assert "chat turns used it up" in r.json()["detail"]


# the usage summed in Python (usage read back on both engines: tests/runs/test_proposals'
# test_credit_usage_is_queryable)
@pytest.mark.sqlite
async def test_runs_and_chat_turns_side_by_side_in_the_usage(client) -> None:
    headers = await _platform()
    for key, who in (("u1", "alice@acme.example"), ("u2", "alice@acme.example"), ("u3", "bob@acme.example")):
        r = await client.post(CHARGES, json=_turn(key, user=who), headers=headers)
        assert r.status_code == 200, r.text
    r = await client.post(CHARGES, json=_turn("u4", kind="embedding", credits_=1), headers=headers)
    assert r.status_code == 200, r.text
    alice_token = await token_for(client, "alice@acme.example")
    alice_id = (await client.get("/api/me", headers=alice_token)).json()["id"]
    await credits.charge(  # a run's charge today, beside them
        company_id=await _acme(),
        user_id=alice_id,
        run_id=424242,
        run_title="a run",
        vcpus=1,
        memory_mib=1024,
        seconds=10,
        actor="worker",
    )
    await login(client, "admin@acme.example")
    usage = (await client.get("/api/credits")).json()
    kinds = {k["kind"]: k for k in usage["usage_by_kind"]}
    assert kinds["chat_turn"]["credits"] == 7.5 and kinds["chat_turn"]["label"] == "chat turns"
    assert kinds["embedding"]["credits"] == 1.0
    assert kinds["run"]["label"] == "runs" and kinds["run"]["credits"] >= 1.3
    assert usage["used"] == pytest.approx(sum(k["credits"] for k in usage["usage_by_kind"]), abs=0.02)
    people = {p["email"]: p for p in usage["usage_by_user"]}
    assert people["alice@acme.example"]["by_kind"]["chat_turn"] == 5.0
    assert people["alice@acme.example"]["by_kind"]["embedding"] == 1.0
    assert people["alice@acme.example"]["by_kind"]["run"] >= 1.3
    assert people["bob@acme.example"]["by_kind"]["chat_turn"] == 2.5
    today = usage["usage_by_day"][-1]
    assert today["by_kind"]["chat_turn"] == 7.5 and today["by_kind"]["run"] >= 1.3
    client.cookies.clear()
    await login(client, "bob@acme.example")  # a member sees their own row only
    mine = (await client.get("/api/credits")).json()
    assert [p["email"] for p in mine["usage_by_user"]] == ["bob@acme.example"]
    assert mine["used"] == usage["used"]


@pytest.mark.sqlite  # the body's validation, not an engine's
async def test_a_kind_named_run_or_a_bad_amount_is_refused(client) -> None:
    headers = await _platform()
    for body in (_turn("x1", kind="run"), _turn("x2", kind="Chat Turn"), _turn("x3", credits_=0)):
        r = await client.post(CHARGES, json=body, headers=headers)
        assert r.status_code in (400, 422), r.text
    assert await PlatformCharge.count() == 0


async def _refusals() -> list[dict[str, Any]]:
    rows = await AuditEntry.select().where(AuditEntry.action == "credits.platform_charge_refused")
    return [{**e, "data": json.loads(e["data"]) if isinstance(e["data"], str) else e["data"]} for e in rows]


async def _globex() -> int:
    return (await Company.select(Company.id).where(Company.name == "Globex").first())["id"]


def _globex_turn(key: str, **extra: Any) -> dict[str, Any]:
    return _turn(key, **{"company": "Globex", "user": "gina@globex.example", **extra})


@pytest.mark.sqlite  # the credential's scope, the app's, not an engine's
async def test_a_credential_scoped_to_acme_cannot_charge_globex(client) -> None:
    acme_platform = await _platform("Acme Analytics")  # the holder of a leaked Acme-only credential
    globex = await _globex()
    answers = [
        await client.post(CHARGES, json=body, headers=acme_platform)
        for body in (_globex_turn("g1"), _globex_turn("g2", company=globex))  # by name, by id
    ]
    assert [r.status_code for r in answers] == [404, 404], [r.text for r in answers]
    unknown = await client.post(CHARGES, json=_turn("g3", company="Nobody Inc"), headers=acme_platform)
    assert unknown.status_code == 404  # the same answer as a company that does not exist
    assert unknown.json() == {
        **answers[0].json(),
        "detail": answers[0].json()["detail"].replace("'Globex'", "'Nobody Inc'"),
    }
    assert await PlatformCharge.count().where(PlatformCharge.company == globex) == 0
    refusals = await _refusals()
    assert len(refusals) == 2 and {e["company_id"] for e in refusals} == {None}  # the operator's trail
    assert {(e["data"]["reason"], e["data"]["company_id"]) for e in refusals} == {
        ("company_out_of_scope", globex)
    }

    ok = await client.post(CHARGES, json=_turn("a1"), headers=acme_platform)  # control: its own company
    assert ok.status_code == 200, ok.text
    globex_platform = await _platform("Globex", name="globex platform")  # control: Globex's own credential
    ok = await client.post(CHARGES, json=_globex_turn("g1"), headers=globex_platform)
    assert ok.status_code == 200, ok.text
    everyone = await _platform(all_companies=True, name="every company")  # the operator's explicit choice
    ok = await client.post(CHARGES, json=_globex_turn("g4"), headers=everyone)
    assert ok.status_code == 200, ok.text


# the scope check, the app's (the migration that leaves credentials unscoped runs on both:
# test_platform_migration)
@pytest.mark.sqlite
async def test_a_credential_made_before_scopes_charges_nobody_until_the_operator_scopes_it(client) -> None:
    made = await platform.create_token("from before", created_by="cli:test", companies=["Acme Analytics"])
    await PlatformTokenCompany.delete().where(PlatformTokenCompany.token == made["id"])  # as migrated
    headers = {"Authorization": f"Bearer {made['token']}"}
    r = await client.post(CHARGES, json=_turn("before-1"), headers=headers)
    assert r.status_code == 403 and r.json()["error"] == "platform_unscoped", r.text
    assert f"cleanroom platform token scope {made['id']}" in r.json()["detail"]
    assert await PlatformCharge.count() == 0
    for bad in ({}, {"companies": ["Acme Analytics"], "all_companies": True}, {"companies": ["Nobody Inc"]}):
        with pytest.raises((platform.Invalid, platform.NotFound)):
            await platform.create_token("unscoped", created_by="cli:test", **bad)  # no global by default
    assert await PlatformToken.count() == 1

    await platform.scope_token(made["id"], actor="cli:test", companies=["Acme Analytics"])  # control
    r = await client.post(CHARGES, json=_turn("before-2"), headers=headers)
    assert r.status_code == 200, r.text
    r = await client.post(CHARGES, json=_globex_turn("before-3"), headers=headers)
    assert r.status_code == 404, r.text  # scoped to Acme only
    entry = await AuditEntry.select().where(AuditEntry.action == "platform.token_scoped").first()
    entry["data"] = json.loads(entry["data"]) if isinstance(entry["data"], str) else entry["data"]
    assert entry["data"]["companies"] == [{"id": await _acme(), "name": "Acme Analytics"}]
    assert entry["data"]["before"] == {"all_companies": False, "companies": []}
    listed = {t["id"]: t for t in await platform.tokens()}
    assert listed[made["id"]]["companies"] == ["Acme Analytics"]


@pytest.fixture
def overdraft(monkeypatch):
    def set_bound(credits_: float) -> None:
        monkeypatch.setenv("CLEANROOM_PLATFORM_OVERDRAFT_CREDITS", str(credits_))
        get_settings.cache_clear()

    yield set_bound
    monkeypatch.delenv("CLEANROOM_PLATFORM_OVERDRAFT_CREDITS", raising=False)
    get_settings.cache_clear()


# the bound compared in Python under the company's lock, which the same-key burst above holds on PostgreSQL
@pytest.mark.sqlite
async def test_a_charge_past_the_overdraft_bound_is_refused_and_audited(client, overdraft) -> None:
    headers = await _platform()
    await _leave(10)
    acme = await _acme()
    big = await client.post(CHARGES, json=_turn("leak-1", credits_=5000), headers=headers)  # default bound
    assert big.status_code == 402 and big.json()["error"] == "overdraft_bound", big.text
    assert "nothing was charged" in big.json()["detail"]

    overdraft(5)
    used = await credits.used(acme)
    r = await client.post(CHARGES, json=_turn("leak-2", credits_=16), headers=headers)  # to -6: past -5
    assert r.status_code == 402 and r.json()["error"] == "overdraft_bound", r.text
    assert await PlatformCharge.count() == 0 and await credits.used(acme) == pytest.approx(used)
    refusals = await _refusals()
    assert [(e["company_id"], e["data"]["reason"], e["data"]["credits"]) for e in refusals] == [
        (acme, "overdraft_bound", 5000.0),
        (acme, "overdraft_bound", 16.0),
    ]
    assert refusals[-1]["data"]["overdraft_bound"] == 5.0

    ok = await client.post(CHARGES, json=_turn("leak-3", credits_=14), headers=headers)  # control: to -4
    assert ok.status_code == 200, ok.text
    assert ok.json()["remaining"] == pytest.approx(-4, abs=0.01) and ok.json()["used_up"] is True
    r = await client.post(CHARGES, json=_turn("leak-4", credits_=2), headers=headers)  # -6 again: refused
    assert r.status_code == 402, r.text
    again = await client.post(CHARGES, json=_turn("leak-3", credits_=14), headers=headers)
    assert again.status_code == 200 and again.json() == ok.json()  # a replay is an answer, not a charge
    overdraft(0)
    await _leave(10)
    r = await client.post(CHARGES, json=_turn("leak-5", credits_=10.01), headers=headers)
    assert r.status_code == 402, r.text  # 0: never below zero
    assert (await client.post(CHARGES, json=_turn("leak-6", credits_=10), headers=headers)).status_code == 200


async def test_two_credentials_using_the_same_key_each_get_their_own_charge(client) -> None:
    first = await _platform(name="first platform")
    second = await _platform(name="second platform")  # the other platform, the same key scheme
    a = await client.post(CHARGES, json=_turn("turn-1"), headers=first)
    assert a.status_code == 200, a.text
    b = await client.post(CHARGES, json=_turn("turn-1", credits_=4), headers=second)
    assert b.status_code == 200, b.text  # not a 409 naming the first platform's charge
    assert "idempotent-replayed" not in b.headers and b.json()["id"] != a.json()["id"]
    assert await _charged("turn-1") == 2
    same_b = await client.post(CHARGES, json=_turn("turn-1"), headers=second)  # differs from b only
    assert same_b.status_code == 409, same_b.text
    assert f"charge {b.json()['id']}" in same_b.json()["detail"]
    assert f"charge {a.json()['id']}" not in same_b.json()["detail"]

    replay = await client.post(CHARGES, json=_turn("turn-1"), headers=first)  # control: still idempotent
    assert replay.status_code == 200 and replay.json() == a.json()
    assert replay.headers["idempotent-replayed"] == "true"
    assert await _charged("turn-1") == 2
