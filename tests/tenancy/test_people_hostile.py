"""The people, teams and permissions endpoints as the hostile party (issue 53), each next to its positive
control: a member acting as an admin, one company's admin on another's people, teams and grants, replayed,
expired and revoked links, a deactivated person's session and token, account enumeration, an assistant token
on every new route, the last admin, and a role change's tokens (review D-L2)."""

from __future__ import annotations

import email
import email.policy
import queue
import socket
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from aiosmtpd.controller import Controller
from argon2 import PasswordHasher, extract_parameters

from backend import clock
from backend.audit.tables import AuditEntry
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.tenancy import login_limits
from backend.tenancy.auth import SELF_AUTHENTICATED_KEY
from backend.tenancy.tables import ApiToken, Company, PersonLink, Session, Team, User
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.sqlite  # no claim here is PostgreSQL's

ADMIN, ALICE, BOB = "admin@acme.example", "alice@acme.example", "bob@acme.example"
GLOBEX_ADMIN, GINA = "admin@globex.example", "gina@globex.example"
GOOD_PW = "lantern quiet orbit 42"


async def uid(email: str) -> int:
    return (await User.select(User.id).where(User.email == email).first())["id"]


def token_of(link: str) -> str:
    return parse_qs(urlparse(link).query)["token"][0]


async def as_(client, email: str, password: str = "demo") -> None:
    client.cookies.clear()
    await login(client, email, password)


async def globex_team() -> int:
    return (await Team.select(Team.id).where(Team.company.name == "Globex").first())["id"]


async def test_a_member_cannot_invite_change_roles_or_grant_and_an_admin_can(client) -> None:
    bob = await uid(BOB)
    await as_(client, ALICE)
    attempts = [
        ("POST", "/api/company/people/invitations", {"email": "new@acme.example"}),
        ("PATCH", f"/api/company/people/{bob}", {"role": "admin"}),
        ("POST", f"/api/company/people/{bob}/password-reset", None),
        ("POST", f"/api/company/people/{bob}/deactivate", None),
        ("POST", "/api/company/teams", {"name": "Shadow"}),
        ("PUT", "/api/company/permissions", {"people": {str(await uid(ALICE)): {"employees": "edit"}}}),
    ]
    for method, path, body in attempts:
        r = await client.request(method, path, json=body)
        assert r.status_code == 403 and r.json()["error"] == "forbidden", (path, r.text)
    assert not await User.exists().where(User.email == "new@acme.example")
    assert (await User.select(User.role).where(User.id == bob).first())["role"] == "member"
    assert (await client.get("/api/records/employees")).status_code == 403  # no grant went through
    # positive control: the admin, the same requests
    await as_(client, ADMIN)
    for method, path, body in attempts[:5]:
        r = await client.request(method, path, json=body)
        assert r.status_code in (200, 201), (path, r.text)


async def test_an_admin_cannot_touch_another_companys_people_teams_or_permissions(client) -> None:
    gina, bob, gx_team = await uid(GINA), await uid(BOB), await globex_team()
    await as_(client, ADMIN)
    acme_team = (await client.post("/api/company/teams", json={"name": "Ops"})).json()["id"]
    before = {
        "gina": await User.select().where(User.id == gina).first(),
        "team": await Team.select().where(Team.id == gx_team).first(),
    }
    attacks = [
        ("PATCH", f"/api/company/people/{gina}", {"role": "auditor"}),
        ("POST", f"/api/company/people/{gina}/deactivate", None),
        ("POST", f"/api/company/people/{gina}/password-reset", None),
        ("POST", f"/api/company/people/{gina}/invitation", None),
        ("DELETE", f"/api/company/people/{gina}/links", None),
        ("PATCH", f"/api/company/teams/{gx_team}", {"name": "Pwned"}),
        ("DELETE", f"/api/company/teams/{gx_team}", None),
        ("PUT", f"/api/company/teams/{gx_team}/members", {"members": [{"user_id": bob}]}),
        ("PUT", f"/api/company/teams/{acme_team}/members", {"members": [{"user_id": gina, "manager": True}]}),
        ("PUT", "/api/company/permissions", {"people": {str(gina): {"deals": "none"}}}),
        ("PUT", "/api/company/permissions", {"teams": {str(gx_team): {"employees": "edit"}}}),
    ]
    for method, path, body in attacks:
        r = await client.request(method, path, json=body)
        assert r.status_code == 404, (method, path, r.text)
    assert await User.select().where(User.id == gina).first() == before["gina"]
    assert await Team.select().where(Team.id == gx_team).first() == before["team"]
    grid = (await client.get("/api/company/permissions")).json()
    assert gina not in [p["id"] for p in grid["people"]] and gx_team not in [t["id"] for t in grid["teams"]]
    assert "globex" not in str((await client.get("/api/company/teams")).json()).lower()
    # gina still reads her deals: no grant of hers was touched
    await as_(client, GINA)
    assert (await client.get("/api/records/deals")).status_code == 200
    # positive control: the same requests on Acme's own bob and team succeed
    await as_(client, ADMIN)
    own = [
        ("POST", f"/api/company/people/{bob}/password-reset", None),
        ("PUT", f"/api/company/teams/{acme_team}/members", {"members": [{"user_id": bob, "manager": True}]}),
        ("PUT", "/api/company/permissions", {"teams": {str(acme_team): {"employees": "read"}}}),
        ("PATCH", f"/api/company/teams/{acme_team}", {"name": "Operations"}),
    ]
    for method, path, body in own:
        r = await client.request(method, path, json=body)
        assert r.status_code in (200, 201), (path, r.text)


async def test_a_link_works_once_and_not_after_it_expired_was_replaced_or_revoked(client) -> None:
    await as_(client, ADMIN)
    first = (await client.post("/api/company/people/invitations", json={"email": "nia@acme.example"})).json()
    nia = await uid("nia@acme.example")
    second = (await client.post(f"/api/company/people/{nia}/invitation")).json()  # resent: the first one ends
    client.cookies.clear()

    async def set_pw(link: dict[str, Any], password: str = GOOD_PW) -> Any:
        return await client.post(
            "/api/auth/set-password", json={"token": token_of(link["link"]), "password": password}
        )

    r = await set_pw(first)
    assert r.status_code == 404 and r.json()["error"] == "link_invalid"
    # expired: the same answer
    await PersonLink.update({PersonLink.expires_at: clock.now() - timedelta(seconds=1)}).where(
        PersonLink.user == nia
    )
    r = await set_pw(second)
    assert r.status_code == 404 and r.json()["error"] == "link_invalid"
    # revoked by the admin: the same answer
    await as_(client, ADMIN)
    third = (await client.post(f"/api/company/people/{nia}/invitation")).json()
    assert (await client.delete(f"/api/company/people/{nia}/links")).json() == {"revoked": 1}
    client.cookies.clear()
    assert (await set_pw(third)).status_code == 404
    assert (
        await client.post("/api/auth/password-link", json={"token": token_of(third["link"])})
    ).status_code == 404
    # positive control: a fresh link works, once; stored only as its hash
    await as_(client, ADMIN)
    fourth = (await client.post(f"/api/company/people/{nia}/invitation")).json()
    client.cookies.clear()
    assert not await PersonLink.exists().where(PersonLink.token_hash == token_of(fourth["link"]))
    assert (await set_pw(fourth)).status_code == 200
    assert (await set_pw(fourth, GOOD_PW + " again")).status_code == 404  # replayed
    await login(client, "nia@acme.example", GOOD_PW)
    # a reset link: works once, and ends the person's sessions
    await as_(client, ADMIN)
    reset = (await client.post(f"/api/company/people/{await uid(BOB)}/password-reset")).json()
    assert reset["kind"] == "reset"
    await as_(client, BOB)
    bob_cookies = dict(client.cookies)
    client.cookies.clear()
    assert (await set_pw(reset, "copper meadow violin 7")).status_code == 200
    assert (await set_pw(reset, "another fine phrase 99")).status_code == 404
    client.cookies.update(bob_cookies)
    assert (await client.get("/api/me")).status_code == 401
    client.cookies.clear()
    assert (await client.post("/api/auth/login", json={"email": BOB, "password": "demo"})).status_code == 401
    await login(client, BOB, "copper meadow violin 7")


async def test_deactivation_ends_sessions_and_tokens_at_once_and_another_may_decide_their_waiting_run(
    client,
) -> None:
    await enable_code()
    alice = await uid(ALICE)
    token = await token_for(client, ALICE)
    run = (await client.post("/api/runs", json=proposal(), headers=token)).json()
    await as_(client, ALICE)
    alice_cookies = dict(client.cookies)
    assert (await client.get("/api/me")).status_code == 200  # positive control: both work before
    assert (await client.get("/api/me", headers=token)).status_code == 200
    await as_(client, ADMIN)
    r = await client.post(f"/api/company/people/{alice}/deactivate")
    assert r.status_code == 200 and r.json()["status"] == "deactivated"
    admin_cookies = dict(client.cookies)
    client.cookies.clear()
    client.cookies.update(alice_cookies)
    assert (await client.get("/api/me")).status_code == 401
    client.cookies.clear()
    assert (await client.get("/api/me", headers=token)).status_code == 401
    assert not await Session.exists().where(Session.user == alice)
    assert all(t["revoked"] for t in await ApiToken.select(ApiToken.revoked).where(ApiToken.user == alice))
    r = await client.post("/api/auth/login", json={"email": ALICE, "password": "demo"})
    assert r.status_code == 401
    # their run stays in the record, waiting; "waiting for them" is a run they asked for (runs.service
    # can_decide: its requester or a company admin): another member may not decide it, an admin may
    assert (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"] == "awaiting_approval"
    await as_(client, BOB)
    assert (await client.post(f"/api/runs/{run['id']}/reject", json={"reason": "x"})).status_code in (
        403,
        404,
    )
    client.cookies.clear()
    client.cookies.update(admin_cookies)
    r = await client.post(f"/api/runs/{run['id']}/reject", json={"reason": "alice left"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    # reactivated: she signs in again; her tokens stay revoked
    assert (await client.post(f"/api/company/people/{alice}/reactivate")).json()["status"] == "active"
    await as_(client, ALICE)
    assert (await client.get("/api/me", headers=token)).status_code == 401


@pytest.fixture
def smtp(monkeypatch) -> Any:
    """A real SMTP server (aiosmtpd) on a free local port; the settings point at it. Mails land in a queue."""
    received: queue.Queue[Any] = queue.Queue()

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            received.put((envelope.rcpt_tos, message.get_body().get_content()))
            return "250 OK"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("CLEANROOM_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("CLEANROOM_SMTP_PORT", str(port))
    monkeypatch.setenv("CLEANROOM_SMTP_STARTTLS", "false")
    get_settings.cache_clear()
    try:
        yield received
    finally:
        controller.stop()
        get_settings.cache_clear()


async def test_no_answer_tells_a_known_address_from_an_unknown_one(client, smtp, monkeypatch) -> None:
    import asyncio

    # forgotten password: one answer; the mail only to the real person
    unknown = await client.post("/api/auth/forgot-password", json={"email": "nobody@acme.example"})
    known = await client.post("/api/auth/forgot-password", json={"email": BOB})
    assert unknown.status_code == known.status_code == 200 and unknown.json() == known.json()
    to, content = await asyncio.to_thread(smtp.get, True, 10)
    assert to == [BOB] and "/set-password?token=crl_" in content
    assert smtp.empty()  # nothing went to the unknown address
    again = await client.post("/api/auth/forgot-password", json={"email": BOB})  # a flood: the same answer,
    assert again.json() == known.json()  # and no second mail within the interval (the next mail is ivy's)
    # sign-in: one answer, and one argon2 verify either way (an unknown address and a person without a
    # password yet are checked against a dummy hash)
    checks: list[str] = []
    real = login_limits.check_password

    async def counted(hasher: Any, stored: str, password: str, *rest: Any) -> bool:
        checks.append(stored[:9])
        return await real(hasher, stored, password, *rest)

    monkeypatch.setattr(login_limits, "check_password", counted)
    await as_(client, ADMIN)
    invited = (
        await client.post("/api/company/people/invitations", json={"email": "ivy@acme.example"})
    ).json()
    assert invited["mailed"] is True and invited["link"] is None
    to, _ = await asyncio.to_thread(smtp.get, True, 10)
    assert to == ["ivy@acme.example"]
    client.cookies.clear()
    checks.clear()  # the admin's own sign-in above
    answers = []
    for address in (BOB, "nobody@acme.example", "ivy@acme.example"):
        r = await client.post("/api/auth/login", json={"email": address, "password": "wrong password!"})
        answers.append((r.status_code, r.json()))
    assert answers[0] == answers[1] == answers[2] and answers[0][0] == 401
    assert len(checks) == 3 and all(c.startswith("$argon2id") for c in checks)
    # invitation: an address with an account in another company gets the answer a new one gets, and
    # nothing is made (gina is Globex's); the note goes to the address, no link to anyone
    await as_(client, ADMIN)
    elsewhere = await client.post("/api/company/people/invitations", json={"email": GINA})
    fresh = await client.post("/api/company/people/invitations", json={"email": "fresh@acme.example"})
    assert elsewhere.status_code == fresh.status_code == 201
    assert set(elsewhere.json()) == set(fresh.json())
    assert elsewhere.json()["mailed"] == fresh.json()["mailed"] is True
    got = {tuple(to) for to, _ in [await asyncio.to_thread(smtp.get, True, 10) for _ in range(2)]}
    assert got == {(GINA,), ("fresh@acme.example",)}
    gina = await User.select(User.company.name).where(User.email == GINA).first()
    assert gina["company.name"] == "Globex"
    # nor does the company's audit trail say it (the operator's does, hashed)
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    noted = await AuditEntry.select(AuditEntry.company_id).where(AuditEntry.action == "user.invite_elsewhere")
    assert noted and all(e["company_id"] is None for e in noted)
    assert GINA not in str(await AuditEntry.select(AuditEntry.data).where(AuditEntry.company_id == acme))


async def test_without_smtp_the_link_of_an_address_elsewhere_leads_nowhere(client) -> None:
    await as_(client, ADMIN)
    elsewhere = (await client.post("/api/company/people/invitations", json={"email": GINA})).json()
    fresh = (
        await client.post("/api/company/people/invitations", json={"email": "fresh@acme.example"})
    ).json()
    assert elsewhere["link"] and fresh["link"] and elsewhere["mailed"] is fresh["mailed"] is False
    client.cookies.clear()
    dead = await client.post("/api/auth/password-link", json={"token": token_of(elsewhere["link"])})
    assert dead.status_code == 404 and dead.json()["error"] == "link_invalid"
    live = await client.post("/api/auth/password-link", json={"token": token_of(fresh["link"])})
    assert live.status_code == 200  # positive control


NEW_ROUTE_PREFIXES = (
    "/api/company/people",
    "/api/company/teams",
    "/api/company/permissions",
    "/api/auth/forgot-password",
    "/api/auth/password-link",
    "/api/auth/set-password",
    "/api/me/password",
)


def new_routes(app: Any) -> list[tuple[str, str, dict[str, Any]]]:
    from tests.support.audit import app_routes

    return sorted(r for r in app_routes(app) if r[1].startswith(NEW_ROUTE_PREFIXES))


async def test_an_assistant_token_is_refused_on_every_new_route(client) -> None:
    from tests.support.audit import concrete

    routes = new_routes(client.app)
    must = {
        ("POST", "/api/company/people/invitations"),
        ("PUT", "/api/company/permissions"),
        ("GET", "/api/company/permissions"),
        ("PUT", "/api/company/teams/{team_id:int}/members"),
        ("POST", "/api/company/people/{user_id:int}/deactivate"),
        ("POST", "/api/auth/set-password"),
        ("POST", "/api/me/password"),
    }
    assert must <= {(m, p) for m, p, _ in routes} and len(routes) >= 19
    assert not any(opt.get(SELF_AUTHENTICATED_KEY) for _, _, opt in routes)
    token = await token_for(client, ADMIN)  # the admin's own assistant: the strongest token there is
    seq = (await AuditEntry.select(AuditEntry.seq).order_by(AuditEntry.seq, ascending=False).first())["seq"]
    for method, path, _ in routes:
        r = await client.request(method, concrete(path), json={}, headers=token)
        assert r.status_code == 403 and r.json()["error"] == "person_required", (method, path, r.text)
    after = await AuditEntry.select(AuditEntry.action).where(AuditEntry.seq > seq)
    assert {e["action"] for e in after} <= {"auth.person_required"}  # nothing but the refusals
    await as_(client, ADMIN)
    # positive control: the admin's session reaches the company's own routes
    assert (await client.get("/api/company/permissions")).status_code == 200
    assert (await client.post("/api/company/teams", json={"name": "Ops"})).status_code == 201


async def test_the_last_admin_stays_and_a_role_change_revokes_tokens(client) -> None:
    admin, bob, frank = await uid(ADMIN), await uid(BOB), await uid("frank@acme.example")
    await as_(client, ADMIN)
    for request in (
        client.patch(f"/api/company/people/{admin}", json={"role": "member"}),
        client.post(f"/api/company/people/{admin}/deactivate"),
    ):
        r = await request
        assert r.status_code == 409 and r.json()["error"] == "last_admin"
    bob_token = await token_for(client, BOB)
    await as_(client, ADMIN)
    assert (await client.patch(f"/api/company/people/{bob}", json={"role": "admin"})).json()[
        "role"
    ] == "admin"
    assert (await client.get("/api/me", headers=bob_token)).status_code == 401  # D-L2: revoked at the change
    # with a second admin, the first may step down (positive control of the guard)
    assert (await client.patch(f"/api/company/people/{admin}", json={"role": "member"})).status_code == 200
    entry = (
        await AuditEntry.select(AuditEntry.data)
        .where(AuditEntry.action == "user.role_changed")
        .output(load_json=True)
    )
    assert {"from": "member", "to": "admin"}.items() <= entry[0]["data"].items()
    # D-L2: an auditor revokes their own token (a token kept from before, revived by hand to have one)
    frank_token = await token_for(client, "frank@acme.example")
    await as_(client, BOB)
    assert (await client.patch(f"/api/company/people/{frank}", json={"role": "auditor"})).status_code == 200
    await ApiToken.update({ApiToken.revoked: False}).where(ApiToken.user == frank)
    token_id = (await ApiToken.select(ApiToken.id).where(ApiToken.user == frank).first())["id"]
    await as_(client, "frank@acme.example")
    assert (await client.delete(f"/api/me/tokens/{token_id}")).status_code == 204
    assert (await client.get("/api/me", headers=frank_token)).status_code == 401


async def test_passwords_policy_rehash_and_own_change(client) -> None:
    # a policy-failing password in a company that is not a demo: no longer signs in (the same answer as a
    # wrong one), audited; the demo company keeps `demo` (positive control)
    await login(client, BOB)
    client.cookies.clear()
    await Company.update({Company.demo: False}).where(Company.name == "Acme Analytics")
    wrong = await client.post("/api/auth/login", json={"email": BOB, "password": "not it at all"})
    weak = await client.post("/api/auth/login", json={"email": BOB, "password": "demo"})
    assert weak.status_code == wrong.status_code == 401 and weak.json() == wrong.json()
    assert await AuditEntry.exists().where(AuditEntry.action == "auth.weak_password_refused")
    await login(client, GINA)  # Globex is still a demo company
    client.cookies.clear()
    # a hash of other argon2 parameters is replaced at the next sign-in
    old = PasswordHasher(time_cost=2, memory_cost=16, parallelism=1).hash(GOOD_PW)
    await User.update({User.password_hash: old}).where(User.email == BOB)
    await login(client, BOB, GOOD_PW)
    new = (await User.select(User.password_hash).where(User.email == BOB).first())["password_hash"]
    assert new != old and extract_parameters(new).time_cost == 1
    # changing one's own password: the old one required, the policy applied, every other session ended
    first = dict(client.cookies)
    client.cookies.clear()
    await login(client, BOB, GOOD_PW)
    r = await client.post(
        "/api/me/password", json={"old_password": "guess guess guess", "new_password": "x" * 20}
    )
    assert r.status_code == 403 and r.json()["error"] == "invalid_credentials"
    r = await client.post("/api/me/password", json={"old_password": GOOD_PW, "new_password": "password1234"})
    assert r.status_code == 422 and r.json()["error"] == "weak_password"
    r = await client.post(
        "/api/me/password", json={"old_password": GOOD_PW, "new_password": "copper meadow violin 7"}
    )
    # the two other sessions: the first sign-in of this test's, and `first`
    assert r.status_code == 200 and r.json() == {"other_sessions_ended": 2}
    assert (await client.get("/api/me")).status_code == 200  # this session goes on
    # guessing the current password from an open session is counted like sign-ins: turned away (429)
    statuses = []
    for _ in range(get_settings().login_attempts_per_window + 1):
        r = await client.post(
            "/api/me/password", json={"old_password": "guess guess guess", "new_password": "x" * 20}
        )
        statuses.append(r.status_code)
    assert statuses[0] == 403 and statuses[-1] == 429, statuses
    client.cookies.clear()
    client.cookies.update(first)
    assert (await client.get("/api/me")).status_code == 401  # the other one ended
    client.cookies.clear()
    await login(client, BOB, "copper meadow violin 7")


async def test_teams_and_the_grid_take_effect_at_the_next_request(client) -> None:
    alice = await uid(ALICE)
    await as_(client, ALICE)
    alice_cookies = dict(client.cookies)
    assert (await client.get("/api/records/employees")).status_code == 403  # control: no HR grant
    await as_(client, ADMIN)
    admin_cookies = dict(client.cookies)
    team = (await client.post("/api/company/teams", json={"name": "Analysts"})).json()
    assert (await client.post("/api/company/teams", json={"name": "Analysts"})).json()[
        "error"
    ] == "team_exists"
    r = await client.put(f"/api/company/teams/{team['id']}/members", json={"members": [{"user_id": alice}]})
    assert [m["user_id"] for m in r.json()["members"]] == [alice]
    r = await client.put("/api/company/permissions", json={"teams": {str(team["id"]): {"nonsense": "read"}}})
    assert r.status_code in (404, 422)
    r = await client.put("/api/company/permissions", json={"teams": {str(team["id"]): {"employees": "read"}}})
    assert r.status_code == 200
    client.cookies.clear()
    client.cookies.update(alice_cookies)
    assert (await client.get("/api/records/employees")).status_code == 200  # through her team, at once
    client.cookies.clear()
    client.cookies.update(admin_cookies)
    assert (await client.patch(f"/api/company/teams/{team['id']}", json={"name": "Data"})).json()[
        "name"
    ] == "Data"
    assert (await client.delete(f"/api/company/teams/{team['id']}")).status_code == 204
    client.cookies.clear()
    client.cookies.update(alice_cookies)
    assert (await client.get("/api/records/employees")).status_code == 403  # gone with the team
    # the grid replaces a person's seeded sets: alice's own row set to tasks only loses deals at once
    client.cookies.clear()
    client.cookies.update(admin_cookies)
    grid = (await client.get("/api/company/permissions")).json()
    assert next(p for p in grid["people"] if p["id"] == alice)["grants"].get("deals") == "edit"
    r = await client.put("/api/company/permissions", json={"people": {str(alice): {"tasks": "read"}}})
    assert next(p for p in r.json()["people"] if p["id"] == alice)["grants"] == {"tasks": "read"}
    client.cookies.clear()
    client.cookies.update(alice_cookies)
    assert (await client.get("/api/records/deals")).status_code == 403
    assert (await client.get("/api/records/tasks")).status_code == 200
