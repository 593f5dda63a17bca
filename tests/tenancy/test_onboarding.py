"""A company starts from an empty database, as docs/onboarding.md says (issue 53): the operator's command,
the admin's password by link, an invited member, a granted dataset, the member's assistant proposes and the
member approves. Each step's hostile party next to it: a weak password, a replayed link, a platform route
without the platform credential, a member before the grant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlparse

import pytest
from typer.testing import CliRunner

from backend.credits import operator
from backend.settings import get_settings
from tests.support.databases import _shared_app
from tests.support.http import console_origin

pytestmark = pytest.mark.sqlite  # no claim here is PostgreSQL's

ADMIN_PW = "lantern quiet orbit 42"
MEMBER_PW = "copper meadow violin 7"


def token_of(link: str) -> str:
    return parse_qs(urlparse(link).query)["token"][0]


@pytest.fixture
async def empty_client(empty_db: str) -> AsyncIterator[object]:
    from litestar.testing import AsyncTestClient

    async with AsyncTestClient(app=_shared_app(empty_db)) as test_client:
        test_client.headers["origin"] = console_origin()
        yield test_client


async def test_from_an_empty_database_to_a_members_approved_run(empty_client) -> None:
    client = empty_client
    # the sign-in page's question, and the only thing it learns
    assert (await client.get("/api/setup")).json() == {"has_company": False}
    # the operator starts it on the host (`cleanroom companies create`: the command's own test is below);
    # no HTTP route creates a company, whatever credential is sent
    body = {"name": "Initech", "admin_email": "peter@initech.test"}
    for path in ("/api/platform/companies", "/api/companies", "/api/company"):
        assert (await client.post(path, json=body)).status_code in (401, 404, 405)
    assert (await client.get("/api/setup")).json() == {"has_company": False}
    started = await operator.start_company(
        "Initech", "Peter@Initech.test", plan=None, admin_name="Peter", actor="cli:test"
    )
    assert started["company"]["name"] == "Initech" and started["company"]["demo"] is False
    invitation = started["invitation"]
    assert invitation["email"] == "peter@initech.test" and invitation["mailed"] is False
    assert invitation["link"].startswith(get_settings().effective_console_url + "/set-password?token=crl_")
    assert (await client.get("/api/setup")).json() == {"has_company": True}
    # the admin cannot sign in before setting a password (the same answer as a wrong one)
    r = await client.post("/api/auth/login", json={"email": "peter@initech.test", "password": ""})
    assert r.status_code in (401, 422)
    # the link: what it is for, then a weak password refused (the link stays usable), then a good one
    link = token_of(invitation["link"])
    info = (await client.post("/api/auth/password-link", json={"token": link})).json()
    assert info["kind"] == "invite" and info["email"] == "peter@initech.test" and info["company"] == "Initech"
    for weak in ("short", "password1234", "peter@initech.test", "Peterpeter12", "aaaaaaaaaaaaaaaa"):
        r = await client.post("/api/auth/set-password", json={"token": link, "password": weak})
        assert r.status_code == 422 and r.json()["error"] == "weak_password", (weak, r.text)
    r = await client.post("/api/auth/set-password", json={"token": link, "password": ADMIN_PW})
    assert r.status_code == 200, r.text
    # replayed: one answer for a used link
    r = await client.post("/api/auth/set-password", json={"token": link, "password": ADMIN_PW + "x"})
    assert r.status_code == 404 and r.json()["error"] == "link_invalid"
    r = await client.post("/api/auth/login", json={"email": "peter@initech.test", "password": ADMIN_PW})
    assert r.status_code == 200, r.text
    # the admin turns code execution on, invites a member, the member sets a password
    assert (
        await client.patch("/api/company/settings", json={"code_execution_enabled": True})
    ).status_code == 200
    r = await client.post(
        "/api/company/people/invitations", json={"email": "milton@initech.test", "name": "Milton"}
    )
    assert r.status_code == 201, r.text
    member_link = token_of(r.json()["link"])
    people = {p["email"]: p for p in (await client.get("/api/company/people")).json()}
    assert people["milton@initech.test"]["status"] == "invited"
    milton_id = people["milton@initech.test"]["id"]
    admin_cookies = dict(client.cookies)
    client.cookies.clear()
    r = await client.post("/api/auth/set-password", json={"token": member_link, "password": MEMBER_PW})
    assert r.status_code == 200, r.text
    await client.post("/api/auth/login", json={"email": "milton@initech.test", "password": MEMBER_PW})
    # before the grant: no deals (the hostile control of the grant)
    assert (await client.get("/api/records/deals")).status_code == 403
    member_cookies = dict(client.cookies)
    # the admin grants deals (read) in the grid
    client.cookies.clear()
    client.cookies.update(admin_cookies)
    grid = await client.put("/api/company/permissions", json={"people": {str(milton_id): {"deals": "read"}}})
    assert grid.status_code == 200, grid.text
    row = next(p for p in grid.json()["people"] if p["id"] == milton_id)
    assert row["grants"] == {"deals": "read"}
    # the member's next request reads it; their assistant proposes; the member approves
    client.cookies.clear()
    client.cookies.update(member_cookies)
    assert (await client.get("/api/records/deals")).status_code == 200
    token = (await client.post("/api/me/tokens", json={"name": "assistant"})).json()["token"]
    client.cookies.clear()
    proposal = {
        "conversation_id": "c1",
        "title": "Deals by stage",
        "plan": "Count the deals by stage.",
        "code": "print('hello')",
        "datasets": ["deals"],
        "files": [],
    }
    run = await client.post("/api/runs", json=proposal, headers={"Authorization": f"Bearer {token}"})
    assert run.status_code == 201, run.text
    run = run.json()
    client.cookies.update(member_cookies)
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    approved = await client.post(f"/api/runs/{run['id']}/approve", json=hashes)
    assert approved.status_code == 200 and approved.json()["status"] == "queued", approved.text


def test_the_operator_command_starts_a_company_and_prints_the_link(empty_db: str, monkeypatch) -> None:
    from backend.cli import app

    monkeypatch.setenv("DATABASE_URL", empty_db)
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        listed = runner.invoke(app, ["companies", "list"])
        assert listed.exit_code == 0 and "no company yet" in listed.output
        made = runner.invoke(
            app, ["companies", "create", "Initech", "--admin", "peter@initech.test", "--plan", "starter"]
        )
        assert made.exit_code == 0, made.output
        assert "plan starter" in made.output and "/set-password?token=crl_" in made.output
        # the same name or the same admin again: refused, nothing made twice
        again = runner.invoke(app, ["companies", "create", "Initech", "--admin", "other@initech.test"])
        assert again.exit_code != 0 and "exists already" in again.output
        taken = runner.invoke(app, ["companies", "create", "Other", "--admin", "peter@initech.test"])
        assert taken.exit_code != 0 and "has an account already" in taken.output
        unknown_plan = runner.invoke(
            app, ["companies", "create", "Other", "--admin", "o@o.test", "--plan", "gold"]
        )
        assert unknown_plan.exit_code != 0 and "no plan" in unknown_plan.output
        shown = runner.invoke(app, ["companies", "show", "Initech"])
        assert shown.exit_code == 0 and "peter@initech.test" in shown.output and "invited" in shown.output
        assert "Other" not in runner.invoke(app, ["companies", "list"]).output
    finally:
        get_settings.cache_clear()


def test_serve_says_how_to_begin_on_an_empty_database_only(
    empty_db: str, demo_db: str, monkeypatch, capsys
) -> None:
    from backend.cli.serve import EMPTY_DATABASE, _say_how_to_begin

    for url, expected in ((empty_db, True), (demo_db, False)):  # the demo database is the control
        monkeypatch.setenv("DATABASE_URL", url)
        get_settings.cache_clear()
        _say_how_to_begin()
        assert (EMPTY_DATABASE in capsys.readouterr().out) is expected
    get_settings.cache_clear()


async def test_only_a_demo_company_gets_people_with_a_preset_password(demo_db: str) -> None:
    from backend import clock
    from backend.errors import Forbidden
    from backend.tenancy import people
    from backend.tenancy.tables import Company, User

    acme = await Company.select(Company.id, Company.demo).where(Company.name == "Acme Analytics").first()
    assert acme["demo"] is True  # the seed marks its companies
    await people.add_seeded_person(
        acme["id"], "d1@acme.example", "D", "", "member", "x", clock.now()
    )  # control
    await Company.update({Company.demo: False}).where(Company.id == acme["id"])
    with pytest.raises(Forbidden):
        await people.add_seeded_person(acme["id"], "d2@acme.example", "D", "", "member", "x", clock.now())
    assert not await User.exists().where(User.email == "d2@acme.example")


def test_the_operator_gives_a_company_an_admin_again(demo_db: str, monkeypatch) -> None:
    from backend.cli import app

    monkeypatch.setenv("DATABASE_URL", demo_db)
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        # another company's person: refused, nothing changed (the hostile case)
        taken = runner.invoke(app, ["companies", "admin", "Acme Analytics", "gina@globex.example"])
        assert taken.exit_code != 0 and "another company" in taken.output
        # a person of the company: made an admin, with a reset link; a new address: invited as an admin
        made = runner.invoke(app, ["companies", "admin", "Acme Analytics", "bob@acme.example"])
        assert made.exit_code == 0 and "/set-password?token=crl_" in made.output, made.output
        fresh = runner.invoke(app, ["companies", "admin", "Acme Analytics", "ops@acme.example"])
        assert fresh.exit_code == 0, fresh.output
        shown = runner.invoke(app, ["companies", "show", "Acme Analytics"]).output
        roles = {line.split()[0]: line.split()[1:] for line in shown.splitlines()[1:]}
        assert roles["bob@acme.example"][0] == "admin" and roles["ops@acme.example"] == ["admin", "invited"]
        assert "gina@globex.example" not in shown
        globex = runner.invoke(app, ["companies", "show", "Globex"]).output
        assert "gina@globex.example" in globex and "member" in globex
    finally:
        get_settings.cache_clear()
