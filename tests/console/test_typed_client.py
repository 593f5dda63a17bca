"""The typed client (`backend/client`) against the real API: every endpoint the console and the MCP tools call
answers the backend's own schema, over one `httpx.AsyncClient` per console process whose cookie jar keeps
nobody's session, closed at shutdown."""

import httpx
import pytest

from backend.actions.schemas import ActionItemInfo
from backend.audit.schemas import AuditEntryInfo, AuditVerification
from backend.client import REPORTS
from backend.credits.schemas import CreditUsage
from backend.drive.schemas import DriveFileInfo, DriveFolderInfo
from backend.evidence.schemas import Reruns
from backend.flows.schemas import FlowDetail, FlowPage
from backend.flows.status import Capability, FlowStatus
from backend.mcp.api import ApiError as McpApiError
from backend.mcp.api import CleanroomApi
from backend.records.schemas import DatasetInfo, RecordPage
from backend.review.schemas import RunTimeline
from backend.runs.schemas import RunDetail, RunPage
from backend.runs.status import RunStatus
from backend.schedules.schemas import ScheduleInfo
from backend.staging.manifest import Manifest
from backend.system_schemas import Health
from backend.tenancy.schemas import (
    ApiToken,
    CompanySettings,
    ForgotAnswer,
    LinkInfo,
    LinkIssued,
    Me,
    NewApiToken,
    PasswordChanged,
    PermissionGrid,
    PersonDetail,
    SetupState,
    TeamView,
)
from console.api import Api, ApiConfig, ApiError
from tests.support.console import Assistant, execute_with_stand_in_vm

pytestmark = pytest.mark.sqlite


async def test_every_endpoint_the_clients_call_answers_its_schema(
    api_app, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    proposed = await assistant.propose()
    await assistant.approve("alice@acme.example", proposed)
    assert await execute_with_stand_in_vm(proposed["id"], monkeypatch) == "succeeded"
    flow_id = (await assistant.propose_flow())["id"]
    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    admin, alice = Api(config), Api(config)
    assert (await admin.login("admin@acme.example", "demo")).user.role == "admin"
    await alice.login("alice@acme.example", "demo")

    run = await alice.run(proposed["id"])
    assert isinstance(run, RunDetail) and run.status == RunStatus.succeeded
    assert run.result is not None and run.result.stdout.startswith("deals per stage:")
    assert Manifest.of(run.manifest).bundle_sha256 == run.bundle_sha256
    assert [f.name for f in run.output_files] == ["deals_per_stage.png"]
    content, media_type = await alice.file_content(run.output_files[0].id)
    assert content.startswith(b"\x89PNG") and media_type.startswith("image/")
    items = await alice.action_items(run.id)
    assert len(items) == 2 and all(isinstance(i, ActionItemInfo) for i in items)
    page = await admin.runs(status=RunStatus.succeeded, limit=5)
    assert isinstance(page, RunPage) and page.items[0].id == run.id and page.total >= 1

    flow = await alice.flow(flow_id)
    assert isinstance(flow, FlowDetail) and flow.status == FlowStatus.awaiting_approval
    assert [s.capability for s in flow.steps] == [Capability.read, Capability.propose_writes]
    flows = await admin.flows()
    assert isinstance(flows, FlowPage) and flows.items[0].id == flow_id

    assert all(isinstance(e, AuditEntryInfo) for e in await alice.run_audit(run.id))
    assert all(isinstance(e, AuditEntryInfo) for e in await alice.flow_audit(flow_id))
    assert (await admin.audit(run=run.id))[0].subject_id
    assert isinstance(await admin.audit_timeline(run.id), RunTimeline)
    for name, shape in REPORTS.items():  # each report's own rows
        rows = await admin.audit_report(name)
        assert all(isinstance(r, shape.__args__[0]) for r in rows)
    assert (await admin.verify_audit()).ok and isinstance(await admin.verify_audit(), AuditVerification)
    assert isinstance(await admin.reruns(run.id), Reruns)

    me = await alice.me()
    assert isinstance(me, Me) and me.email == "alice@acme.example" and me.company.name == "Acme Analytics"
    assert isinstance(await admin.company_settings(), CompanySettings)
    assert all(isinstance(p, PersonDetail) for p in await admin.people())
    assert isinstance(await admin.credits(), CreditUsage)
    assert all(isinstance(s, ScheduleInfo) for s in await admin.schedules())
    assert isinstance(await admin.health(), Health)
    assert all(isinstance(d, DatasetInfo) for d in await alice.datasets())
    assert isinstance(await alice.records("deals", page_size=1), RecordPage)
    assert all(isinstance(f, DriveFileInfo) for f in await alice.drive_files(all="true"))
    assert all(isinstance(f, DriveFolderInfo) for f in await alice.drive_folders())

    created = await alice.create_token("typed client test")
    assert isinstance(created, NewApiToken) and created.token
    assert any(isinstance(t, ApiToken) and t.id == created.id for t in await alice.tokens())
    assistant_api = CleanroomApi(config.http(), created.token)  # MCP's client, the same schemas
    assert (await assistant_api.me()).auth == "token"
    assert (await assistant_api.run(run.id)).id == run.id
    with pytest.raises(McpApiError) as refused:
        await assistant_api.approve(run.id, run.code_sha256, run.bundle_sha256)
    assert refused.value.status == 403
    await alice.revoke_token(created.id)


async def test_the_people_teams_and_permissions_methods_answer_their_schemas(api_app) -> None:
    """Issue 53's client methods, which the console's People and Teams pages call, against the real API."""
    from urllib.parse import parse_qs, urlparse

    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    admin, anyone = Api(config), Api(config)
    await admin.login("admin@acme.example", "demo")
    assert await anyone.setup_state() == SetupState(has_company=True)
    issued = await admin.invite("nia@acme.example", name="Nia")
    assert isinstance(issued, LinkIssued) and issued.link and not issued.mailed
    nia = next(p for p in await admin.people() if p.email == "nia@acme.example")
    assert nia.status == "invited"
    issued = await admin.resend_invitation(nia.id)
    token = parse_qs(urlparse(issued.link or "").query)["token"][0]
    assert isinstance(await anyone.password_link(token), LinkInfo)
    assert (await anyone.set_password(token, "lantern quiet orbit 42")).email == "nia@acme.example"
    assert isinstance(await anyone.forgot_password("nia@acme.example"), ForgotAnswer)
    assert (await admin.send_password_reset(nia.id)).kind == "reset"
    assert (await admin.revoke_links(nia.id)).revoked == 1
    assert (await admin.set_role(nia.id, "auditor")).role == "auditor"
    assert (await admin.deactivate(nia.id)).status == "deactivated"
    assert (await admin.reactivate(nia.id)).status == "active"
    team = await admin.create_team("Analysts")
    assert isinstance(team, TeamView)
    team = await admin.set_team_members(team.id, [{"user_id": nia.id, "manager": True}])
    assert [m.user_id for m in team.members] == [nia.id]
    assert (await admin.rename_team(team.id, "Data")).name == "Data"
    assert any(t.id == team.id for t in await admin.teams())
    grid = await admin.replace_permissions(teams={team.id: {"deals": "read"}})
    assert isinstance(grid, PermissionGrid) and isinstance(await admin.permission_grid(), PermissionGrid)
    await admin.delete_team(team.id)
    niav = Api(config)
    await niav.login("nia@acme.example", "lantern quiet orbit 42")
    changed = await niav.change_password("lantern quiet orbit 42", "copper meadow violin 7")
    assert isinstance(changed, PasswordChanged)


async def test_one_shared_http_client_that_keeps_no_session_and_closes(api_app) -> None:
    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    maria, bob = Api(config), Api(config)
    assert maria.http is bob.http is config.http()  # one client for the console, not one per request
    await maria.login("maria@acme.example", "demo")
    assert maria.session and not list(config.http().cookies.jar)  # the shared jar took no Set-Cookie
    with pytest.raises(ApiError) as refused:
        await bob.me()  # so a second user without a session of their own is not signed in as maria
    assert refused.value.status == 401
    assert (await Api(config, maria.session).me()).email == "maria@acme.example"
    shared = config.http()
    await config.aclose()
    assert shared.is_closed
    assert config.http() is not shared and not config.http().is_closed  # opened again on next use
    await config.aclose()
