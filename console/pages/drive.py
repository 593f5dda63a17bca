"""Drive (every signed-in person): folders, upload with a progress bar, who sees each file (its owner,
their team, the company: the owner changes it), delete to a trash the owner restores from for 30 days,
and the person's and the company's Drive use against their quotas.

Every action is the API's (`/api/drive/...` through the typed client, with the person's session); the API
decides who may see, change, delete or restore what. The browser uploads to the console (Quasar's uploader
shows the progress), and the console hands the file on to the API as the person. An auditor reads only:
the page shows no upload, sharing or delete controls to an auditor (the API refuses them anyway)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.drive.schemas import DriveFileInfo, DriveFolderInfo, DriveQuota
from backend.records.columns import VISIBILITIES
from console import session, theme, widgets
from console.api import Api
from console.widgets import FAILED

WHO_SEES = {"private": "Only me", "team": "My team", "company": "The company"}
TRASH_EXPLAINED = (
    "Deleted files stay in the trash for {days} days: restore one there until then. After that it is "
    "purged for good. Files in the trash still count against your quota until they are purged; "
    "“Delete forever” frees the room at once."
)


def register() -> None:
    @ui.page("/drive")
    async def drive_page(folder: int | None = None) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/drive"):
            return redirect
        api = session.api()
        with theme.frame("Drive"):
            page = DrivePage(api, folder)
        await ui.context.client.connected()
        await page.load()
        return None


def bar(label: str, used: int, quota: int, marker: str, note: str = "") -> None:
    share = min(1.0, used / quota) if quota else 0.0
    with ui.column().classes("gap-1 min-w-64 grow").mark(marker):
        text = f"{label}: {widgets.human_bytes(used)} of {widgets.human_bytes(quota)}"
        ui.label(text + (f" ({note})" if note else "")).classes("text-sm").mark(f"{marker}-text")
        color = "negative" if share >= 0.95 else "warning" if share >= 0.8 else "primary"
        ui.linear_progress(value=share, show_value=False, color=color).props("rounded size=8px")


class DrivePage:
    def __init__(self, api: Api, folder_id: int | None) -> None:
        self.api = api
        self.folder_id = folder_id
        me = session.me()
        self.me_id = me.id if me else None
        self.is_admin = bool(me and me.role == "admin")
        self.reads_only = bool(me and me.role == "auditor")
        self.quota_box = ui.row().classes("w-full gap-6").mark("drive-quota")
        self.where = ui.row().classes("items-center gap-1").mark("drive-where")
        if not self.reads_only:
            with ui.card().classes("w-full gap-2").mark("drive-add"):
                with ui.row().classes("items-end gap-4 w-full"):
                    self.visibility = (
                        ui.select(WHO_SEES, value="private", label="New files are seen by")
                        .classes("min-w-48")
                        .mark("drive-new-visibility")
                    )
                    self.folder_name = ui.input("New folder").props("dense").mark("drive-folder-name")
                    ui.button("Create folder", icon="create_new_folder", on_click=self.create_folder).props(
                        "flat"
                    ).mark("drive-create-folder")
                from backend.settings import get_settings

                limit = get_settings().max_upload_bytes
                ui.upload(
                    label=f"Upload files (up to {widgets.human_bytes(limit)} each)",
                    multiple=True,
                    auto_upload=True,
                    max_file_size=limit,
                    on_upload=self.uploaded,
                    on_rejected=lambda: ui.notify(
                        f"A file is over the {widgets.human_bytes(limit)} limit per file.", type="warning"
                    ),
                ).props("hide-upload-btn").classes("w-full").mark("drive-upload")
        self.listing = ui.column().classes("w-full gap-0").mark("drive-files")
        with ui.card().classes("w-full gap-2").mark("drive-trash"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("delete", color="grey-7")
                ui.label("Trash").classes("text-lg font-medium")
            self.trash_note = ui.label("").classes("text-sm text-grey-7")
            self.trash = ui.column().classes("w-full gap-0")

    async def load(self) -> None:
        await widgets.load_into(self.listing, self.fetch, self.render, "Loading Drive…")

    async def fetch(self) -> tuple[Any, ...]:
        folders = await self.api.drive_folders(parent_id=self.folder_id)
        files = await self.api.drive_files(folder_id=self.folder_id)
        here = None
        if self.folder_id is not None:  # the folder itself, for its name and its parent
            here = next(
                (f for f in await self._all_folders() if f.id == self.folder_id),
                None,
            )
        return folders, files, here, await self.api.drive_trash(), await self.api.drive_quota()

    async def _all_folders(self) -> list[DriveFolderInfo]:
        """Folders by a bounded walk from the top (the API lists a folder's children)."""
        seen: list[DriveFolderInfo] = []
        queue: list[int | None] = [None]
        while queue and len(seen) < 500:
            parent = queue.pop(0)
            for folder in await self.api.drive_folders(parent_id=parent):
                seen.append(folder)
                queue.append(folder.id)
                if folder.id == self.folder_id:
                    return seen
        return seen

    def render(self, data: tuple[Any, ...]) -> None:
        folders, files, here, trash, quota = data
        self.render_quota(quota)
        self.render_where(here)
        if not folders and not files:
            widgets.empty_state("No files here yet. Upload some above.", "folder_open")
        for folder in folders:
            with ui.row().classes("items-center gap-3 w-full border-b py-2").mark(f"folder-{folder.id}"):
                ui.icon("folder", color="amber-8")
                ui.link(folder.name, f"/drive?folder={folder.id}").classes("grow")
                ui.label(WHO_SEES.get(folder.visibility, folder.visibility)).classes("text-grey-7 text-sm")
        for file in files:
            self.render_file(file)
        self.render_trash(trash, quota)

    def render_quota(self, quota: DriveQuota) -> None:
        self.quota_box.clear()
        with self.quota_box:
            trash = (
                f"{widgets.human_bytes(quota.user_trash_bytes)} in the trash"
                if quota.user_trash_bytes
                else ""
            )
            bar("You keep", quota.user_used_bytes, quota.user_quota_bytes, "quota-user", trash)
            bar("The company keeps", quota.company_used_bytes, quota.company_quota_bytes, "quota-company")

    def render_where(self, here: DriveFolderInfo | None) -> None:
        self.where.clear()
        with self.where:
            ui.link("Drive", "/drive").mark("drive-top")
            if here is not None:
                if here.parent_id is not None:
                    ui.label("/ …")
                    ui.link("up", f"/drive?folder={here.parent_id}")
                ui.label(f"/ {here.name}").classes("font-medium").mark("drive-folder-title")

    def mine(self, file: DriveFileInfo) -> bool:
        return file.owner_id == self.me_id

    def render_file(self, file: DriveFileInfo) -> None:
        with ui.row().classes("items-center gap-3 w-full border-b py-2 no-wrap").mark(f"file-{file.id}"):
            ui.icon("description", color="primary")
            with ui.column().classes("gap-0 grow min-w-0"):
                ui.label(widgets.reveal_invisible(file.name)).classes("font-medium break-all").mark(
                    "file-name"
                )
                ui.label(
                    f"{file.kind} · {widgets.human_bytes(file.size)} · {widgets.when(file.created_at)}"
                    + (f" · output of run #{file.run_id}" if file.run_id else "")
                ).classes("text-sm text-grey-7")
            ui.button(icon="download", on_click=lambda f=file: self.download(f)).props(
                "flat round dense aria-label=Download"
            ).mark("file-download")
            changeable = (self.mine(file) or self.is_admin) and not self.reads_only and file.run_id is None
            if changeable:
                ui.select(
                    WHO_SEES,
                    value=file.visibility,
                    on_change=lambda e, f=file: self.share(f, e.value),
                ).props("dense options-dense").classes("w-36").mark("file-visibility")
                ui.button(icon="delete", on_click=lambda f=file: self.delete(f)).props(
                    "flat round dense color=negative aria-label=Delete"
                ).mark("file-delete")
            else:
                ui.label(WHO_SEES.get(file.visibility, file.visibility)).classes("text-grey-7 text-sm w-36")

    def render_trash(self, trash: list[DriveFileInfo], quota: DriveQuota) -> None:
        self.trash_note.text = TRASH_EXPLAINED.format(days=quota.trash_days)
        self.trash.clear()
        with self.trash:
            if not trash:
                ui.label("The trash is empty.").classes("text-grey-6 text-sm").mark("trash-empty")
            for file in trash:
                with (
                    ui.row()
                    .classes("items-center gap-3 w-full border-b py-2 no-wrap")
                    .mark(f"trashed-{file.id}")
                ):
                    with ui.column().classes("gap-0 grow min-w-0"):
                        ui.label(widgets.reveal_invisible(file.name)).classes("break-all").mark(
                            "trashed-name"
                        )
                        ui.label(
                            f"{widgets.human_bytes(file.size)} · deleted {widgets.when(file.trashed_at)}"
                            f" · purged {widgets.when(file.purge_at)}"
                        ).classes("text-sm text-grey-7")
                    if self.reads_only:
                        continue
                    ui.button(
                        "Restore", icon="restore_from_trash", on_click=lambda f=file: self.restore(f)
                    ).props("flat").mark("trashed-restore")
                    ui.button("Delete forever", on_click=lambda f=file: self.confirm_purge(f)).props(
                        "flat color=negative"
                    ).mark("trashed-purge")

    # actions: each is the API's, as this person

    async def uploaded(self, event: Any) -> None:
        upload = event.file
        data = await upload.read()
        result = await widgets.call(
            self.api.upload_file(
                upload.name, data, folder_id=self.folder_id, visibility=self.visibility.value
            )
        )
        if result is not FAILED:
            ui.notify(f"Uploaded {upload.name}.", type="positive")
        await self.load()

    async def create_folder(self) -> None:
        name = (self.folder_name.value or "").strip()
        if not name:
            ui.notify("Give the folder a name.", type="warning")
            return
        result = await widgets.call(self.api.create_folder(name, self.folder_id))
        if result is not FAILED:
            self.folder_name.value = ""
            await self.load()

    async def share(self, file: DriveFileInfo, visibility: str) -> None:
        if visibility not in VISIBILITIES or visibility == file.visibility:
            return
        result = await widgets.call(self.api.share_file(file.id, visibility))
        if result is not FAILED:
            ui.notify(f"{file.name}: seen by {WHO_SEES[visibility].lower()}.", type="positive")
        await self.load()

    async def delete(self, file: DriveFileInfo) -> None:
        result = await widgets.call(self.api.trash_file(file.id))
        if result is not FAILED:
            ui.notify(f"{file.name} moved to the trash. Restore it there within 30 days.", type="info")
        await self.load()

    async def restore(self, file: DriveFileInfo) -> None:
        result = await widgets.call(self.api.restore_file(file.id))
        if result is not FAILED:
            ui.notify(f"{file.name} restored.", type="positive")
        await self.load()

    def confirm_purge(self, file: DriveFileInfo) -> None:
        with ui.dialog() as dialog, ui.card().mark("purge-dialog"):
            ui.label(f"Delete {file.name} for good? It cannot be restored afterwards.")
            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat")

                async def confirm() -> None:
                    dialog.close()
                    if await widgets.call(self.api.purge_file(file.id)) is not FAILED:
                        ui.notify(f"{file.name} deleted for good.", type="info")
                    await self.load()

                ui.button("Delete forever", on_click=confirm).props("color=negative").mark("purge-confirm")
        dialog.open()

    async def download(self, file: DriveFileInfo) -> None:
        result = await widgets.call(self.api.file_content(file.id))
        if result is not FAILED:
            content, media = result  # type: ignore[misc]
            ui.download.content(content, file.name, media)
