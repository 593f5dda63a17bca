"""Authority is read at every request, in every API process (issue 30): the caller's context (token or session,
person, company, teams, grants) is two queries a request and is never kept between requests, so what a
person or an admin takes away holds from the very next request. Each attack is written as the hostile party
would try it, next to its positive control: a revoked token used again (through a second API process on the
same database), a person whose grant or team was taken away reading the data, a disabled account, a role
taken away, and a company switch turned off."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.tenancy.tables import PermissionSet, TeamMembership, User, UserPermissionSet
from tests.support.http import console_origin, login, token_for
from tests.support.runs import proposal

pytestmark = pytest.mark.usefixtures("acme_on")


@pytest.fixture
async def second_process(demo_db: str) -> AsyncIterator[object]:
    """Another API process on the same database (its own app, its own event loop and pool)."""
    from litestar.testing import AsyncTestClient

    from backend.app import create_app

    app = create_app(database_url=demo_db, run_hooks=False)
    async with AsyncTestClient(app=app) as other:
        other.headers["origin"] = console_origin()
        yield other


async def test_a_revoked_token_is_refused_at_its_next_request_in_every_process(
    client, second_process
) -> None:
    assistant = await token_for(client, "alice@acme.example")
    run = await client.post("/api/runs", json=proposal(), headers=assistant)
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    # positive control: both processes serve the token, again and again (nothing cached refuses it either)
    for api in (client, second_process, client, second_process):
        assert (await api.get(f"/api/runs/{run_id}", headers=assistant)).status_code == 200
    await login(client, "alice@acme.example")
    tokens = (await client.get("/api/me/tokens")).json()
    assert (await client.delete(f"/api/me/tokens/{tokens[-1]['id']}")).status_code == 204
    client.cookies.clear()
    # the attack: the assistant goes on with the revoked token, first at the other process
    for api in (second_process, client):
        refused = await api.get(f"/api/runs/{run_id}", headers=assistant)
        assert refused.status_code == 401, refused.text
        assert (await api.post("/api/runs", json=proposal(), headers=assistant)).status_code == 401


async def test_a_signed_out_session_is_refused_at_its_next_request_in_every_process(
    client, second_process
) -> None:
    await login(client, "alice@acme.example")
    cookie = dict(client.cookies)
    second_process.cookies.update(cookie)
    assert (await second_process.get("/api/me")).status_code == 200  # positive control
    assert (await client.post("/api/auth/logout")).status_code == 200
    assert (await second_process.get("/api/me")).status_code == 401


async def test_a_grant_taken_away_refuses_the_data_at_the_next_request(client, second_process) -> None:
    hannah = await token_for(client, "hannah@acme.example")
    # positive control: the HR partner's assistant reads employees and may stage them
    assert (await second_process.get("/api/records/employees", headers=hannah)).status_code == 200
    assert (await client.get("/api/records/employees", headers=hannah)).status_code == 200
    # an admin takes the HR permission set away
    user = await User.select(User.id).where(User.email == "hannah@acme.example").first()
    hr = await PermissionSet.select(PermissionSet.id).where(PermissionSet.name == "HR").first()
    await UserPermissionSet.delete().where(
        (UserPermissionSet.user == user["id"]) & (UserPermissionSet.permission_set == hr["id"])
    )
    # the attack: the very next reads and a proposal staging employees, through either process
    for api in (second_process, client):
        assert (await api.get("/api/records/employees", headers=hannah)).status_code == 403
        staged = await api.post("/api/runs", json=proposal(datasets=["employees"]), headers=hannah)
        assert staged.status_code == 403, staged.text
    # control: what her other sets grant still reads
    assert (await client.get("/api/records/tasks", headers=hannah)).status_code == 200


async def test_a_team_taken_away_hides_its_records_at_the_next_request(client) -> None:
    bob = await token_for(client, "bob@acme.example")

    async def team_deals() -> set[int]:
        r = await client.get(
            "/api/records/deals", params={"visibility": "team", "page_size": 500}, headers=bob
        )
        assert r.status_code == 200, r.text
        return {d["id"] for d in r.json()["items"]}

    seen = await team_deals()
    assert seen  # positive control: bob's team's deals
    user = await User.select(User.id).where(User.email == "bob@acme.example").first()
    await TeamMembership.delete().where(TeamMembership.user == user["id"])
    assert await team_deals() == set()  # the attack: his next read shows none of them


async def test_a_disabled_account_and_a_role_taken_away_hold_at_the_next_request(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    bob_token = await token_for(client, "bob@acme.example")
    run = await client.post("/api/runs", json=proposal(), headers=alice)
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    # bob's token, minted as a member: alice's run is not his to see
    assert (await client.get(f"/api/runs/{run_id}", headers=bob_token)).status_code == 404
    # made an auditor: the role change revokes the token at once (review D-L2: a member's token must not
    # read as an auditor); bob's own session reads it at its next request (positive control), and taken back
    # to member, his session's next request does not
    await login(client, "admin@acme.example")
    bob = await User.select(User.id).where(User.email == "bob@acme.example").first()
    assert (
        await client.patch(f"/api/company/people/{bob['id']}", json={"role": "auditor"})
    ).status_code == 200
    assert (await client.get(f"/api/runs/{run_id}", headers=bob_token)).status_code == 401
    admin_cookies = dict(client.cookies)
    client.cookies.clear()
    await login(client, "bob@acme.example")
    bob_cookies = dict(client.cookies)
    assert (await client.get(f"/api/runs/{run_id}")).status_code == 200
    client.cookies.clear()
    client.cookies.update(admin_cookies)
    assert (
        await client.patch(f"/api/company/people/{bob['id']}", json={"role": "member"})
    ).status_code == 200
    client.cookies.clear()
    client.cookies.update(bob_cookies)
    assert (await client.get(f"/api/runs/{run_id}")).status_code == 404
    client.cookies.clear()
    # alice's account disabled: her token's next request is refused
    assert (await client.get(f"/api/runs/{run_id}", headers=alice)).status_code == 200
    await User.update({User.active: False}).where(User.email == "alice@acme.example")
    assert (await client.get(f"/api/runs/{run_id}", headers=alice)).status_code == 401


async def test_a_company_switch_turned_off_holds_at_the_next_request(client, second_process) -> None:
    alice = await token_for(client, "alice@acme.example")
    first = await second_process.post("/api/runs", json=proposal(), headers=alice)
    assert first.status_code == 201, first.text  # positive control: code execution on
    await login(client, "admin@acme.example")
    off = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert off.status_code == 200, off.text
    client.cookies.clear()
    refused = await second_process.post("/api/runs", json=proposal(), headers=alice)
    assert refused.status_code == 403 and refused.json()["error"] == "code_execution_disabled", refused.text
    # the assistant's ability to write turned off: runs do not exist for the company at the next request
    assert (await second_process.get(f"/api/runs/{first.json()['id']}", headers=alice)).status_code == 200
    await login(client, "admin@acme.example")
    assert (
        await client.patch("/api/company/settings", json={"assistant_write_enabled": False})
    ).status_code == 200
    client.cookies.clear()
    assert (await second_process.get(f"/api/runs/{first.json()['id']}", headers=alice)).status_code == 404
