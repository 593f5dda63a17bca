"""Teams and permissions (admin): teams (create, rename, delete, members and managers) and the grid of which
datasets each team and each person may read or edit. A change takes effect at the person's next request."""

from __future__ import annotations

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.tenancy.schemas import PermissionGrid, PersonDetail, TeamView
from console import session, theme, widgets
from console.api import Api
from console.widgets import FAILED

LEVELS = {"none": "—", "read": "read", "edit": "edit"}


def register() -> None:
    @ui.page("/teams")
    async def teams_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/teams", admin=True, auditor=True):
            return redirect
        admin = session.is_admin()
        with theme.frame("Teams and permissions"):
            with ui.card().classes("w-full gap-2").mark("teams"):
                ui.label("Teams").classes("text-lg font-medium")
                if admin:
                    with ui.row().classes("items-end gap-2"):
                        new_name = ui.input("New team").classes("w-64").mark("team-name")
                        create = ui.button("Create team").mark("create-team")
                teams = ui.column().classes("w-full gap-2")
            with ui.card().classes("w-full gap-2").mark("grid"):
                ui.label("Dataset permissions").classes("text-lg font-medium")
                ui.label(
                    "What each team and each person may read (or edit) besides what their teams grant. A change "
                    "applies from the person's next request; an approved run checks again when it starts."
                ).classes("text-sm text-grey-7")
                grid = ui.column().classes("w-full")
        page = TeamsPage(session.api(), teams, grid, admin)
        if admin:

            async def create_team() -> None:
                if await widgets.call(page.api.create_team(new_name.value.strip())) is FAILED:
                    return
                new_name.value = ""
                await page.load()

            create.on_click(create_team)
        await ui.context.client.connected()
        await page.load()
        return None


class TeamsPage:
    def __init__(self, api: Api, teams: ui.element, grid: ui.element, admin: bool) -> None:
        self.api = api
        self.teams_box = teams
        self.grid_box = grid
        self.admin = admin
        self.people: list[PersonDetail] = []
        self.cells: dict[tuple[str, int], dict[str, ui.select]] = {}

    async def load(self) -> None:
        people = await widgets.call(self.api.people())
        self.people = [] if people is FAILED else people  # type: ignore[assignment]
        await widgets.load_into(self.teams_box, self.api.teams, self.render_teams)
        await widgets.load_into(self.grid_box, self.api.permission_grid, self.render_grid)

    # ------------------------------------------------------------------------------------------------ teams

    def render_teams(self, teams: list[TeamView]) -> None:
        if not teams:
            widgets.empty_state("No teams yet.", icon="groups")
        options = {p.id: p.email for p in self.people}
        for team in teams:
            with ui.card().classes("w-full gap-1").props("flat bordered").mark(f"team-{team.name}"):
                with ui.row().classes("items-center gap-2 w-full"):
                    name = (
                        ui.input(value=team.name)
                        .props("dense")
                        .classes("w-64")
                        .mark(f"team-name-{team.name}")
                    )
                    name.set_enabled(self.admin)
                    if self.admin:
                        ui.button("Rename", on_click=lambda t=team, n=name: self.rename(t, n.value)).props(
                            "flat dense"
                        ).mark(f"rename-{team.name}")
                        ui.button("Delete", on_click=lambda t=team: self.delete(t)).props(
                            "flat dense color=negative"
                        ).mark(f"delete-{team.name}")
                members = (
                    ui.select(
                        options,
                        multiple=True,
                        value=[m.user_id for m in team.members],
                        label="Members",
                    )
                    .props("use-chips")
                    .classes("w-full")
                    .mark(f"members-{team.name}")
                )
                managers = (
                    ui.select(
                        options,
                        multiple=True,
                        value=[m.user_id for m in team.members if m.manager],
                        label="Managers (they decide for the team's members)",
                    )
                    .props("use-chips")
                    .classes("w-full")
                    .mark(f"managers-{team.name}")
                )
                members.set_enabled(self.admin)
                managers.set_enabled(self.admin)
                if self.admin:
                    ui.button(
                        "Save members",
                        on_click=lambda t=team, m=members, g=managers: self.save_members(t, m.value, g.value),
                    ).props("flat dense").mark(f"save-members-{team.name}")

    async def rename(self, team: TeamView, name: str) -> None:
        changed = await widgets.call(self.api.rename_team(team.id, name.strip())) is not FAILED
        await self.load()  # loaded again before the notice: the notice tells what the page shows
        if changed:
            ui.notify("Team renamed", type="positive")

    async def delete(self, team: TeamView) -> None:
        changed = await widgets.call(self.api.delete_team(team.id)) is not FAILED
        await self.load()  # loaded again before the notice: the notice tells what the page shows
        if changed:
            ui.notify(f"Team {team.name} deleted")

    async def save_members(self, team: TeamView, members: list[int], managers: list[int]) -> None:
        everyone = list(dict.fromkeys([*members, *managers]))  # a manager is a member too
        body = [{"user_id": uid, "manager": uid in managers} for uid in everyone]
        changed = await widgets.call(self.api.set_team_members(team.id, body)) is not FAILED
        await self.load()  # loaded again before the notice: the notice tells what the page shows
        if changed:
            ui.notify("Members saved", type="positive")

    # ------------------------------------------------------------------------------------------------ grid

    def render_grid(self, grid: PermissionGrid) -> None:
        self.cells = {}
        rows = [("team", t.id, f"Team {t.name}", t.grants) for t in grid.teams]
        rows += [("person", p.id, p.email, p.grants) for p in grid.people if p.role != "admin"]
        with ui.element("table").classes("w-full").mark("permission-grid"):
            with ui.element("tr"):
                ui.element("th").classes("text-left")
                for dataset in grid.datasets:
                    with ui.element("th").classes("text-left px-1"):
                        ui.label(dataset).classes("text-sm")
            for kind, row_id, label, grants in rows:
                with ui.element("tr").mark(f"grid-row-{label}"):
                    with ui.element("td").classes("pr-2"):
                        ui.label(label).classes("text-sm")
                    cells: dict[str, ui.select] = {}
                    for dataset in grid.datasets:
                        with ui.element("td").classes("px-1"):
                            cell = (
                                ui.select(LEVELS, value=grants.get(dataset, "none"))
                                .props("dense options-dense")
                                .mark(f"grid-{label}-{dataset}")
                            )
                            cell.set_enabled(self.admin)
                            cells[dataset] = cell
                    self.cells[(kind, row_id)] = cells
        if grid.people and any(p.role == "admin" for p in grid.people):
            ui.label("Admins read and edit every dataset.").classes("text-sm text-grey-7")
        if self.admin:
            ui.button("Save permissions", on_click=self.save_grid).mark("save-permissions")

    async def save_grid(self) -> None:
        teams: dict[int, dict[str, str]] = {}
        people: dict[int, dict[str, str]] = {}
        for (kind, row_id), cells in self.cells.items():
            (teams if kind == "team" else people)[row_id] = {d: c.value for d, c in cells.items()}
        changed = await widgets.call(self.api.replace_permissions(teams=teams, people=people)) is not FAILED
        await self.load()  # loaded again before the notice: the notice tells what the page shows
        if changed:
            ui.notify("Permissions saved (and recorded in the audit trail)", type="positive")
