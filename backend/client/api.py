"""`CleanroomClient`: one typed method per endpoint the console, the MCP tools and the fleet host agent call,
each returning the backend's own response schema (docs/api.md lists the endpoints)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from backend.actions.schemas import ActionItemInfo
from backend.audit.schemas import AuditEntryInfo, AuditPublicKey, AuditVerification
from backend.client.http import ApiClient, decode, refusal_of
from backend.credits.schemas import CreditUsage
from backend.drive.schemas import DriveFileInfo, DriveFolderInfo, DriveQuota
from backend.evidence.schemas import Rerun, Reruns
from backend.flows.schemas import FlowDetail, FlowPage
from backend.notify.schemas import NewWebhook, Preferences, WebhookInfo
from backend.records.schemas import (
    DatasetBody,
    DatasetDefinitionInfo,
    DatasetInfo,
    DatasetJobInfo,
    PreviewInfo,
    RecordPage,
    SourceInfo,
)
from backend.review import schemas as review
from backend.review.schemas import RunTimeline
from backend.runs.schemas import FindingAcknowledgementInfo, QueueHistory, RunDetail, RunPage, RunStats
from backend.runs.status import RunStatus
from backend.schedules.schemas import ScheduleInfo
from backend.system_schemas import GuestEnvironment, Health
from backend.tenancy.schemas import (
    ApiToken,
    CompanySettings,
    Connection,
    ConnectionAnswer,
    ConnectionRequest,
    ForgotAnswer,
    ForwardingCheck,
    LinkInfo,
    LinkIssued,
    LinksRevoked,
    LoginResult,
    Me,
    NewApiToken,
    PasswordChanged,
    PasswordSet,
    PermissionGrid,
    PersonDetail,
    SetupState,
    TeamView,
)
from backend.tenancy.sso_schemas import SsoOffer, SsoSettings, SsoStart

# a review report's name -> the list it answers
REPORTS: dict[str, Any] = {
    "approved-despite-warning": list[review.ApprovedDespiteWarning],
    "unreviewed-followups": list[review.UnreviewedFollowup],
    "accepted-per-person": list[review.AcceptedPerPerson],
    "rejection-rate": list[review.RejectionRate],
    "schedules": list[review.ScheduleReads],
    "findings-over-time": list[review.FindingsOnDay],
}


class CleanroomClient(ApiClient):
    """Every method is one documented endpoint; what it returns is that endpoint's response schema."""

    # identity and company
    async def authenticate(
        self, email: str, password: str, headers: dict[str, str] | None = None
    ) -> tuple[LoginResult, httpx.Response]:
        """The sign-in answer, and the response itself: its Set-Cookie carries the session."""
        body = {"email": email, "password": password}
        response = await self.send("POST", "/api/auth/login", json=body, headers=headers)
        return decode(LoginResult, response), response

    async def forwarding_check(self, headers: dict[str, str]) -> ForwardingCheck:
        """Whether the API verifies the console's probe (signed in `headers`) with its own forwarding key."""
        return await self.call(ForwardingCheck, "GET", "/api/auth/forwarding", headers=headers)

    async def sso_offer(self, email: str) -> SsoOffer:
        """Whether a company's single sign-on serves this address's domain."""
        return await self.call(SsoOffer, "GET", "/api/auth/sso", params={"email": email})

    async def sso_start(self, email: str) -> SsoStart:
        """Where to send the browser for the company's provider, and the state to expect back."""
        return await self.call(SsoStart, "POST", "/api/auth/sso/start", json={"email": email})

    async def sso_return(
        self, code: str, state: str, headers: dict[str, str] | None = None
    ) -> tuple[LoginResult, httpx.Response]:
        """The provider's code and state: the sign-in answer, and the response whose Set-Cookie carries the
        session (as `authenticate`)."""
        body = {"code": code, "state": state}
        response = await self.send("POST", "/api/auth/sso/return", json=body, headers=headers)
        return decode(LoginResult, response), response

    async def sso_settings(self) -> SsoSettings | None:
        """The company's single sign-on (None: none); the secret is never in it."""
        return await self.call(SsoSettings | None, "GET", "/api/company/sso")

    async def configure_sso(self, **settings: Any) -> SsoSettings:
        """`client_secret` is sent, never shown again; a field left out keeps its value."""
        return await self.call(SsoSettings, "PUT", "/api/company/sso", json=settings)

    async def remove_sso(self) -> None:
        await self.send("DELETE", "/api/company/sso")

    async def logout(self) -> None:
        await self.send("POST", "/api/auth/logout")

    async def me(self) -> Me:
        return await self.call(Me, "GET", "/api/me/")

    async def company_settings(self) -> CompanySettings:
        return await self.call(CompanySettings, "GET", "/api/company/settings")

    async def update_company_settings(self, **changes: Any) -> CompanySettings:
        return await self.call(CompanySettings, "PATCH", "/api/company/settings", json=changes)

    async def people(self) -> list[PersonDetail]:
        """The company's people with role and status (active, invited, deactivated): admins and auditors."""
        return await self.call(list[PersonDetail], "GET", "/api/company/people")

    # a company run by its people (issue 53; docs/api.md "People, teams and permissions")
    async def setup_state(self) -> SetupState:
        """No session needed: whether any company exists yet (the sign-in page's "no company yet")."""
        return await self.call(SetupState, "GET", "/api/setup")

    async def invite(self, email: str, *, name: str = "", role: str = "member") -> LinkIssued:
        """Admin: `link` is the one-time URL when no SMTP is set (shown once), None when it was mailed."""
        body = {"email": email, "name": name, "role": role}
        return await self.call(LinkIssued, "POST", "/api/company/people/invitations", json=body)

    async def resend_invitation(self, user_id: int) -> LinkIssued:
        return await self.call(LinkIssued, "POST", f"/api/company/people/{user_id}/invitation")

    async def revoke_links(self, user_id: int) -> LinksRevoked:
        return await self.call(LinksRevoked, "DELETE", f"/api/company/people/{user_id}/links")

    async def send_password_reset(self, user_id: int) -> LinkIssued:
        return await self.call(LinkIssued, "POST", f"/api/company/people/{user_id}/password-reset")

    async def set_role(self, user_id: int, role: str) -> PersonDetail:
        """member | admin | auditor; 409 `last_admin` for the company's last admin. Revokes their tokens."""
        return await self.call(PersonDetail, "PATCH", f"/api/company/people/{user_id}", json={"role": role})

    async def deactivate(self, user_id: int) -> PersonDetail:
        return await self.call(PersonDetail, "POST", f"/api/company/people/{user_id}/deactivate")

    async def reactivate(self, user_id: int) -> PersonDetail:
        return await self.call(PersonDetail, "POST", f"/api/company/people/{user_id}/reactivate")

    async def forgot_password(self, email: str) -> ForgotAnswer:
        """No session needed; one answer for every address."""
        return await self.call(ForgotAnswer, "POST", "/api/auth/forgot-password", json={"email": email})

    async def password_link(self, token: str) -> LinkInfo:
        """No session needed: what a link is for; 404 `link_invalid` for one that cannot be used."""
        return await self.call(LinkInfo, "POST", "/api/auth/password-link", json={"token": token})

    async def set_password(self, token: str, password: str) -> PasswordSet:
        """No session needed: set a password by a one-time link; 422 `weak_password` says why not."""
        body = {"token": token, "password": password}
        return await self.call(PasswordSet, "POST", "/api/auth/set-password", json=body)

    async def change_password(self, old_password: str, new_password: str) -> PasswordChanged:
        body = {"old_password": old_password, "new_password": new_password}
        return await self.call(PasswordChanged, "POST", "/api/me/password", json=body)

    # notifications (backend/notify): a person's own preferences, a company admin's webhook endpoints
    async def notification_preferences(self) -> Preferences:
        return await self.call(Preferences, "GET", "/api/me/notifications")

    async def set_notification_preferences(
        self, email_enabled: bool | None = None, muted: list[str] | None = None
    ) -> Preferences:
        body = {k: v for k, v in {"email_enabled": email_enabled, "muted": muted}.items() if v is not None}
        return await self.call(Preferences, "PUT", "/api/me/notifications", json=body)

    async def webhooks(self) -> list[WebhookInfo]:
        return await self.call(list[WebhookInfo], "GET", "/api/company/webhooks")

    async def create_webhook(self, url: str, events: list[str]) -> NewWebhook:
        """The answer carries the endpoint's secret, this once."""
        return await self.call(
            NewWebhook, "POST", "/api/company/webhooks", json={"url": url, "events": events}
        )

    async def delete_webhook(self, webhook_id: int) -> None:
        await self.send("DELETE", f"/api/company/webhooks/{webhook_id}")

    async def teams(self) -> list[TeamView]:
        return await self.call(list[TeamView], "GET", "/api/company/teams")

    async def create_team(self, name: str) -> TeamView:
        return await self.call(TeamView, "POST", "/api/company/teams", json={"name": name})

    async def rename_team(self, team_id: int, name: str) -> TeamView:
        return await self.call(TeamView, "PATCH", f"/api/company/teams/{team_id}", json={"name": name})

    async def delete_team(self, team_id: int) -> None:
        await self.send("DELETE", f"/api/company/teams/{team_id}")

    async def set_team_members(self, team_id: int, members: list[dict[str, Any]]) -> TeamView:
        """`members`: [{"user_id": 3, "manager": False}, ...], the whole list."""
        body = {"members": members}
        return await self.call(TeamView, "PUT", f"/api/company/teams/{team_id}/members", json=body)

    async def permission_grid(self) -> PermissionGrid:
        return await self.call(PermissionGrid, "GET", "/api/company/permissions")

    async def replace_permissions(
        self,
        *,
        teams: dict[int, dict[str, str]] | None = None,
        people: dict[int, dict[str, str]] | None = None,
    ) -> PermissionGrid:
        """Rows named are replaced whole ({dataset: read | edit | none}); others stay."""
        body = {"teams": teams or {}, "people": people or {}}
        return await self.call(PermissionGrid, "PUT", "/api/company/permissions", json=body)

    async def tokens(self) -> list[ApiToken]:
        """Never the secret."""
        return await self.call(list[ApiToken], "GET", "/api/me/tokens")

    async def create_token(self, name: str) -> NewApiToken:
        """`token` is the secret, in this answer only (stored hashed)."""
        return await self.call(NewApiToken, "POST", "/api/me/tokens", json={"name": name})

    async def revoke_token(self, token_id: int) -> None:
        await self.send("DELETE", f"/api/me/tokens/{token_id}")

    # assistants connected by OAuth: the consent page's request and answer, the person's connections
    async def connection_request(self, request_id: str) -> ConnectionRequest:
        return await self.call(ConnectionRequest, "GET", f"/api/me/connect/{quote(request_id, safe='')}")

    async def answer_connection(self, request_id: str, allow: bool) -> ConnectionAnswer:
        path = f"/api/me/connect/{quote(request_id, safe='')}"
        return await self.call(ConnectionAnswer, "POST", path, json={"allow": allow})

    async def connections(self) -> list[Connection]:
        return await self.call(list[Connection], "GET", "/api/me/connections")

    async def revoke_connection(self, grant_id: int) -> None:
        await self.send("DELETE", f"/api/me/connections/{grant_id}")

    # runs
    async def runs(self, **filters: Any) -> RunPage:
        return await self.call(RunPage, "GET", "/api/runs", params=filters)

    async def run_stats(self, days: int = 30) -> RunStats:
        """Runs per day by status, median VM start and duration per day (the runs the caller may list)."""
        return await self.call(RunStats, "GET", "/api/runs/stats", params={"days": days})

    async def run(
        self, run_id: int, *, wait_seconds: int | None = None, seen_status: RunStatus | str | None = None
    ) -> RunDetail:
        """With `wait_seconds`, the API answers once the status is no longer `seen_status` (or time is up)."""
        params = {"wait_seconds": wait_seconds, "seen_status": seen_status}
        return await self.call(RunDetail, "GET", f"/api/runs/{run_id}", params=params)

    async def propose_run(self, body: dict[str, Any]) -> RunDetail:
        return await self.call(RunDetail, "POST", "/api/runs", json=body)

    async def revise_run(self, run_id: int, body: dict[str, Any]) -> RunDetail:
        return await self.call(RunDetail, "POST", f"/api/runs/{run_id}/revisions", json=body)

    async def approve(self, run_id: int, code_sha256: str | None, bundle_sha256: str | None) -> RunDetail:
        """Sends the hashes the approver saw: the API refuses if the code or the data changed since."""
        body = {"code_sha256": code_sha256, "bundle_sha256": bundle_sha256}
        return await self.call(RunDetail, "POST", f"/api/runs/{run_id}/approve", json=body)

    async def reject(self, run_id: int, reason: str) -> RunDetail:
        body = {"reason": reason or None}
        return await self.call(RunDetail, "POST", f"/api/runs/{run_id}/reject", json=body)

    async def acknowledge_finding(self, run_id: int, index: int, reason: str) -> FindingAcknowledgementInfo:
        """Admin only: finding `index` of the run's `findings` is expected here (its cell and column)."""
        path = f"/api/runs/{run_id}/findings/{index}/acknowledgement"
        return await self.call(FindingAcknowledgementInfo, "POST", path, json={"reason": reason})

    async def finding_acknowledgements(self) -> list[FindingAcknowledgementInfo]:
        return await self.call(list[FindingAcknowledgementInfo], "GET", "/api/injection/acknowledgements")

    async def withdraw_acknowledgement(self, ack_id: int) -> None:
        await self.send("DELETE", f"/api/injection/acknowledgements/{ack_id}")

    async def reruns(self, run_id: int) -> Reruns:
        return await self.call(Reruns, "GET", f"/api/runs/{run_id}/reruns")

    async def request_rerun(self, run_id: int) -> Rerun:
        return await self.call(Rerun, "POST", f"/api/runs/{run_id}/reruns")

    async def run_audit(self, run_id: int) -> list[AuditEntryInfo]:
        return await self.call(list[AuditEntryInfo], "GET", f"/api/runs/{run_id}/audit")

    async def action_items(self, run_id: int) -> list[ActionItemInfo]:
        return await self.call(list[ActionItemInfo], "GET", f"/api/runs/{run_id}/action-items")

    async def accept_item(self, item_id: int) -> ActionItemInfo:
        return await self.call(ActionItemInfo, "POST", f"/api/action-items/{item_id}/accept")

    async def reject_item(self, item_id: int, reason: str = "") -> ActionItemInfo:
        body = {"reason": reason or None}
        return await self.call(ActionItemInfo, "POST", f"/api/action-items/{item_id}/reject", json=body)

    # flows
    async def flows(self, **filters: Any) -> FlowPage:
        return await self.call(FlowPage, "GET", "/api/flows", params=filters)

    async def flow(self, flow_id: int) -> FlowDetail:
        return await self.call(FlowDetail, "GET", f"/api/flows/{flow_id}")

    async def propose_flow(self, body: dict[str, Any]) -> FlowDetail:
        return await self.call(FlowDetail, "POST", "/api/flows", json=body)

    async def approve_flow(self, flow_id: int, steps: list[dict[str, str | None]]) -> FlowDetail:
        """`steps`: every step's {code_sha256, bundle_sha256} as the approver saw them, in step order."""
        return await self.call(FlowDetail, "POST", f"/api/flows/{flow_id}/approve", json={"steps": steps})

    async def reject_flow(self, flow_id: int, reason: str) -> FlowDetail:
        body = {"reason": reason or None}
        return await self.call(FlowDetail, "POST", f"/api/flows/{flow_id}/reject", json=body)

    async def flow_audit(self, flow_id: int) -> list[AuditEntryInfo]:
        return await self.call(list[AuditEntryInfo], "GET", f"/api/flows/{flow_id}/audit")

    # records and drive
    async def datasets(self) -> list[DatasetInfo]:
        return await self.call(list[DatasetInfo], "GET", "/api/records/")

    async def dataset_definitions(self) -> list[DatasetDefinitionInfo]:
        """The company's own datasets' definitions."""
        return await self.call(list[DatasetDefinitionInfo], "GET", "/api/datasets/")

    async def dataset_templates(self) -> list[DatasetDefinitionInfo]:
        """The twelve built-ins, as templates."""
        return await self.call(list[DatasetDefinitionInfo], "GET", "/api/datasets/templates")

    async def dataset_definition(self, name: str) -> DatasetDefinitionInfo:
        return await self.call(DatasetDefinitionInfo, "GET", f"/api/datasets/{name}")

    async def define_dataset(self, body: DatasetBody) -> DatasetDefinitionInfo:
        """Admin, signed in: a new company-defined dataset."""
        return await self.call(
            DatasetDefinitionInfo, "POST", "/api/datasets/", json=body.model_dump(mode="json")
        )

    async def update_dataset(self, name: str, body: DatasetBody) -> DatasetDefinitionInfo:
        """Admin, signed in: the dataset's new definition (its name stays)."""
        return await self.call(
            DatasetDefinitionInfo, "PUT", f"/api/datasets/{name}", json=body.model_dump(mode="json")
        )

    # imports and syncs (a person's: an API token gets 403 person_required); each runs as a background job
    async def preview_import(self, filename: str, content: Any) -> PreviewInfo:
        """The file's columns and their inferred kinds, to confirm before a new dataset is defined from it.
        `content`: bytes or a binary file object (streamed, never read whole here)."""
        files = {"file": (filename, content, "application/octet-stream")}
        return await self.call(PreviewInfo, "POST", "/api/datasets/import/preview", files=files)

    async def start_import(
        self,
        name: str,
        filename: str,
        content: Any,
        *,
        dry_run: bool = True,
        new: dict[str, Any] | None = None,
    ) -> DatasetJobInfo:
        """Start an import job (202): `new` = {label, key_column, columns (the preview's, as confirmed),
        writable?} defines a new dataset (admin) when applied. Follow it with `dataset_job`."""
        form: dict[str, str] = {"dry_run": "true" if dry_run else "false"}
        if new is not None:
            form.update(
                label=new.get("label", ""),
                key_column=new["key_column"],
                columns=json.dumps(new["columns"]),
            )
            if new.get("writable") is not None:
                form["writable"] = json.dumps(new["writable"])
        files = {"file": (filename, content, "application/octet-stream")}
        return await self.call(DatasetJobInfo, "POST", f"/api/datasets/{name}/import", data=form, files=files)

    async def dataset_job(self, job_id: int) -> DatasetJobInfo:
        """An import or sync job: state, rows read (of the total when known), its report or why it failed."""
        return await self.call(DatasetJobInfo, "GET", f"/api/datasets/jobs/{job_id}")

    async def dataset_source(self, name: str) -> SourceInfo | None:
        """The dataset's sync source (status, last sync, last error; never the connection string); None: none."""
        path = f"/api/datasets/{name}/source"
        try:
            response = await self.http.request("GET", path, headers=self.auth_headers())
        except httpx.HTTPError as exc:
            error = self.unreachable(exc)
            raise error from (None if error is exc else exc)
        refusal = refusal_of(response) if response.status_code >= 400 else None
        if refusal is not None:
            if response.status_code == 404 and refusal.code == "no_source":
                return None
            raise self.refused(response, refusal)
        return decode(SourceInfo, response)

    async def set_dataset_source(self, name: str, **body: Any) -> SourceInfo:
        return await self.call(SourceInfo, "PUT", f"/api/datasets/{name}/source", json=body)

    async def start_sync(self, name: str) -> DatasetJobInfo:
        """Sync now, as a background job (202); a failed sync ends the job failed with the reason."""
        return await self.call(DatasetJobInfo, "POST", f"/api/datasets/{name}/sync")

    async def records(self, dataset: str, **params: Any) -> RecordPage:
        return await self.call(RecordPage, "GET", f"/api/records/{dataset}", params=params)

    async def drive_files(self, **params: Any) -> list[DriveFileInfo]:
        return await self.call(list[DriveFileInfo], "GET", "/api/drive/files", params=params)

    async def drive_folders(self, parent_id: int | None = None) -> list[DriveFolderInfo]:
        params = {"parent_id": parent_id}
        return await self.call(list[DriveFolderInfo], "GET", "/api/drive/folders", params=params)

    async def create_folder(self, name: str, parent_id: int | None = None) -> DriveFolderInfo:
        body = {"name": name, "parent_id": parent_id}
        return await self.call(DriveFolderInfo, "POST", "/api/drive/folders", json=body)

    async def upload_file(
        self, name: str, data: bytes, *, folder_id: int | None = None, visibility: str = "private"
    ) -> DriveFileInfo:
        """A multipart upload, as a browser's form sends it (the API checks size, quotas, rate and name)."""
        form = {"visibility": visibility, **({"folder_id": str(folder_id)} if folder_id is not None else {})}
        files = {"file": (name, data, "application/octet-stream")}
        return await self.call(DriveFileInfo, "POST", "/api/drive/files", data=form, files=files)

    async def share_file(self, file_id: int, visibility: str) -> DriveFileInfo:
        body = {"visibility": visibility}
        return await self.call(DriveFileInfo, "PATCH", f"/api/drive/files/{file_id}", json=body)

    async def trash_file(self, file_id: int) -> DriveFileInfo:
        return await self.call(DriveFileInfo, "DELETE", f"/api/drive/files/{file_id}")

    async def drive_trash(self) -> list[DriveFileInfo]:
        return await self.call(list[DriveFileInfo], "GET", "/api/drive/trash")

    async def restore_file(self, file_id: int) -> DriveFileInfo:
        return await self.call(DriveFileInfo, "POST", f"/api/drive/trash/{file_id}/restore")

    async def purge_file(self, file_id: int) -> None:
        await self.send("DELETE", f"/api/drive/trash/{file_id}")

    async def drive_quota(self) -> DriveQuota:
        return await self.call(DriveQuota, "GET", "/api/drive/quota")

    async def file_content(self, file_id: int) -> tuple[bytes, str]:
        response = await self.send("GET", f"/api/drive/files/{file_id}/content")
        return response.content, response.headers.get("content-type", "application/octet-stream")

    # credits, schedules, health, audit
    async def credits(self) -> CreditUsage:
        return await self.call(CreditUsage, "GET", "/api/credits")

    async def schedules(self) -> list[ScheduleInfo]:
        return await self.call(list[ScheduleInfo], "GET", "/api/schedules")

    async def schedule_action(self, schedule_id: int, action: str) -> ScheduleInfo | None:
        """`pause`, `resume` (the schedule as it is now) or `delete` (nothing)."""
        if action == "delete":
            await self.send("DELETE", f"/api/schedules/{schedule_id}")
            return None
        return await self.call(ScheduleInfo, "POST", f"/api/schedules/{schedule_id}/{action}")

    async def health(self) -> Health:
        return await self.call(Health, "GET", "/api/system/health")

    async def sandbox_environment(self) -> GuestEnvironment:
        """The guest's python and package versions (the built image's manifest)."""
        return await self.call(GuestEnvironment, "GET", "/api/sandbox/environment")

    async def queue_history(self, hours: int = 24) -> QueueHistory:
        """The caller's company's queue depth over the last `hours`."""
        return await self.call(QueueHistory, "GET", "/api/system/queue-history", params={"hours": hours})

    async def audit(self, **filters: Any) -> list[AuditEntryInfo]:
        """The company's entries; a filter left as None is not sent."""
        return await self.call(list[AuditEntryInfo], "GET", "/api/audit", params=filters)

    async def audit_timeline(self, run_id: int) -> RunTimeline:
        return await self.call(RunTimeline, "GET", f"/api/audit/runs/{run_id}/timeline")

    async def audit_report(self, name: str, **period: Any) -> list[Any]:
        """One of the review's reports (`approved-despite-warning`, ...), over `from`/`to` when given."""
        shape = REPORTS[name]
        params = {k: v for k, v in period.items() if v}
        return await self.call(shape, "GET", f"/api/audit/reports/{name}", params=params)

    async def verify_audit(self) -> AuditVerification:
        return await self.call(AuditVerification, "POST", "/api/audit/verify")

    async def audit_public_key(self) -> AuditPublicKey:
        return await self.call(AuditPublicKey, "GET", "/api/audit/public-key")
