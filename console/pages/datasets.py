"""Datasets (admin; issue 54): the company's own datasets, defining a new one (from scratch or from one of the
twelve built-ins as a template), each one's sync source (last sync, why it failed) with "Sync now", and the
import page: upload a CSV/XLSX/ODS → for a new dataset the inferred columns and kinds to confirm or correct
(key column, writable columns) → a dry run's report → the import, with a progress bar fed by the job's state.

Every action is the API's (`/api/datasets/...` through the typed client, with the person's session): imports and
syncs are background jobs the page follows (`GET /api/datasets/jobs/{id}`), so a long one never holds a request.
The uploaded file is kept by the console in a private temporary folder while the page is open (the dry run and
the import send the same file), and removed when the import ends or the page closes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.records.columns import ColumnKind
from backend.records.schemas import DatasetBody, DatasetDefinitionInfo, DatasetJobInfo, SourceInfo
from console import session, theme, widgets
from console.api import Api, ApiError
from console.widgets import FAILED

KINDS = [str(k) for k in ColumnKind]
POLL_SECONDS = 0.5


def register() -> None:
    @ui.page("/datasets")
    async def datasets_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/datasets", admin=True):
            return redirect
        with theme.frame("Datasets"):
            page = DatasetsPage(session.api())
        await ui.context.client.connected()
        await page.load()
        return None

    @ui.page("/datasets/import")
    async def import_page(name: str = "") -> RedirectResponse | None:
        # an admin (any dataset, or a new one), or a member with edit on a company dataset (into that one); an
        # auditor decides nothing. The API checks each again.
        if redirect := session.redirect_if_signed_out("/datasets/import"):
            return redirect
        if session.role() == "auditor":
            return RedirectResponse("/runs")
        with theme.frame("Import a spreadsheet"):
            page = ImportPage(session.api(), name)
        await ui.context.client.connected()
        await page.load()
        return None


# --------------------------------------------------------------------------------------------- following a job


class JobView:
    """A job's progress bar and state, polled from the API until it ends; `on_end` gets the ended job."""

    def __init__(self, api: Api, marker: str, on_end: Callable[[DatasetJobInfo], Any]) -> None:
        self.api, self.on_end = api, on_end
        with ui.column().classes("w-full gap-1").mark(marker) as self.box:
            self.text = ui.label("").classes("text-sm").mark(f"{marker}-text")
            self.bar = ui.linear_progress(value=0, show_value=False).props("rounded size=10px")
        self.timer: ui.timer | None = None
        self.job: DatasetJobInfo | None = None

    def follow(self, job: DatasetJobInfo) -> None:
        self.show(job)
        with self.box:  # the timer lives and dies with the view's own box
            self.timer = ui.timer(POLL_SECONDS, self.poll)

    def show(self, job: DatasetJobInfo) -> None:
        self.job = job
        what = "Dry run" if job.dry_run else ("Sync" if job.kind == "sync" else "Import")
        if job.state == "queued":
            self.text.text = f"{what}: waiting to start…"
            self.bar.props("indeterminate")
        elif job.state == "running":
            if job.rows_total:
                self.bar.props(remove="indeterminate")
                self.bar.value = min(1.0, job.rows_read / job.rows_total)
                self.text.text = f"{what}: {job.rows_read:,} of {job.rows_total:,} rows"
            else:
                self.bar.props("indeterminate")
                self.text.text = f"{what}: {job.rows_read:,} rows read"
        else:
            self.bar.props(remove="indeterminate")
            self.bar.value = 1.0
            self.bar.props(f"color={'positive' if job.state == 'done' else 'negative'}")
            self.text.text = (
                f"{what} finished: {job.rows_read:,} rows read."
                if job.state == "done"
                else f"{what} failed: {job.error}"
            )

    async def poll(self) -> None:
        if self.job is None or self.timer is None:
            return
        try:
            job = await self.api.dataset_job(self.job.id)
        except ApiError as exc:
            self.timer.cancel()
            self.text.text = exc.message
            return
        self.show(job)
        if job.state in ("done", "failed"):
            self.timer.cancel()
            result = self.on_end(job)
            if hasattr(result, "__await__"):
                await result


def report_view(report: Any, marker: str) -> None:
    """An import's (or dry run's) report: the counts, and the refusals with their row numbers and reasons."""
    with ui.column().classes("w-full gap-1").mark(marker):
        verb = "Imported" if report.applied else "Dry run (nothing written)"
        ui.label(
            f"{verb}: {report.rows_read:,} rows read — {report.added:,} added, {report.changed:,} changed, "
            f"{report.unchanged:,} unchanged, {report.refused:,} refused"
        ).classes("font-medium").mark(f"{marker}-counts")
        if report.refusals:
            rows = [{"row": r.row, "reason": r.reason} for r in report.refusals]
            ui.table(
                columns=[
                    {"name": "row", "label": "Row", "field": "row", "align": "right"},
                    {"name": "reason", "label": "Why it was refused", "field": "reason", "align": "left"},
                ],
                rows=rows,
                row_key="row",
            ).props("dense flat").classes("w-full").mark(f"{marker}-refusals")
            if report.refusals_not_listed:
                ui.label(f"… and {report.refusals_not_listed:,} more refused rows.").classes("text-sm")
        if report.ignored_columns:
            ui.label("Columns not in the dataset, ignored: " + ", ".join(report.ignored_columns)).classes(
                "text-sm text-grey-7"
            )


# ------------------------------------------------------------------------------------------------- the list


class DatasetsPage:
    def __init__(self, api: Api) -> None:
        self.api = api
        with ui.row().classes("items-center gap-2"):
            ui.button(
                "Import a spreadsheet",
                icon="upload_file",
                on_click=lambda: ui.navigate.to("/datasets/import"),
            ).mark("open-import")
        self.sync_box = ui.column().classes("w-full gap-1")  # a sync's job, outside the list it reloads
        self.listing = ui.column().classes("w-full gap-2").mark("datasets")
        with widgets.section("Define a dataset", "add_box", "define-dataset"):
            self.define_box = ui.column().classes("w-full gap-2")

    async def load(self) -> None:
        await widgets.load_into(self.listing, self.fetch, self.render, "Loading datasets…")
        templates = await widgets.call(self.api.dataset_templates())
        self.define_box.clear()
        with self.define_box:
            DefineForm(self.api, [] if templates is FAILED else templates, self.load)  # type: ignore[arg-type]

    async def fetch(self) -> list[tuple[DatasetDefinitionInfo, SourceInfo | None]]:
        out = []
        for dataset in await self.api.dataset_definitions():
            out.append((dataset, await self.api.dataset_source(dataset.name)))
        return out

    def render(self, data: list[tuple[DatasetDefinitionInfo, SourceInfo | None]]) -> None:
        if not data:
            widgets.empty_state(
                "No datasets of the company's own yet: import a spreadsheet, or define one below.",
                "table_chart",
            )
        for dataset, source in data:
            with ui.card().classes("w-full gap-1").props("flat bordered").mark(f"dataset-{dataset.name}"):
                with ui.row().classes("items-center gap-3 w-full"):
                    ui.icon("table_chart", color="primary")
                    ui.label(dataset.label).classes("text-lg font-medium")
                    ui.label(dataset.name).classes("text-grey-7 cr-code")
                    ui.space()
                    ui.label(f"{dataset.rows or 0:,} rows").classes("text-sm").mark(f"rows-{dataset.name}")
                    ui.button(
                        "Import",
                        icon="upload_file",
                        on_click=lambda d=dataset: ui.navigate.to(f"/datasets/import?name={d.name}"),
                    ).props("flat dense").mark(f"import-{dataset.name}")
                columns = ", ".join(
                    f"{c.name} ({c.kind}{': ' + '|'.join(c.enum) if c.enum else ''})" for c in dataset.columns
                )
                ui.label(f"Columns: {columns}").classes("text-sm")
                ui.label(
                    f"Key: {dataset.key_column} · a proposed change may set: {', '.join(dataset.writable) or 'nothing'}"
                    + (f" · from the template {dataset.template}" if dataset.template else "")
                ).classes("text-sm text-grey-7")
                self.render_source(dataset, source)

    def render_source(self, dataset: DatasetDefinitionInfo, source: SourceInfo | None) -> None:
        with ui.column().classes("w-full gap-1").mark(f"source-{dataset.name}"):
            if source is None:
                ui.label("No sync source (rows come from imports).").classes("text-sm text-grey-7")
                return
            where = source.table or "a query"
            last = (
                f"last synced {widgets.when(source.last_synced_at)}"
                if source.last_synced_at
                else "never synced"
            )
            schedule = f" · on the schedule {source.cron} ({source.timezone})" if source.cron else ""
            ui.label(f"Synced from PostgreSQL ({where}): {last}{schedule}").classes("text-sm")
            if source.status == "failed":
                ui.label(
                    f"The last sync failed ({widgets.when(source.last_attempt_at)}): {source.last_error}. "
                    "The last good data is kept."
                ).classes("text-sm text-negative").mark(f"source-error-{dataset.name}")

            async def sync_now() -> None:
                job = await widgets.call(self.api.start_sync(dataset.name))
                if job is FAILED:
                    return
                self.sync_box.clear()
                with self.sync_box:
                    view = JobView(self.api, f"sync-job-{dataset.name}", self.synced)
                view.follow(job)  # type: ignore[arg-type]

            ui.button("Sync now", icon="sync", on_click=sync_now).props("flat dense").mark(
                f"sync-{dataset.name}"
            )

    async def synced(self, job: DatasetJobInfo) -> None:
        if job.state == "done":
            ui.notify(f"{job.dataset} synced.", type="positive")
        else:
            ui.notify(f"The sync of {job.dataset} failed: {job.error}", type="negative", multi_line=True)
        await self.load()


class DefineForm:
    """Name, label, columns (name, kind, enum), key column, writable columns; or a built-in as the template."""

    def __init__(self, api: Api, templates: list[DatasetDefinitionInfo], reload: Callable[[], Any]) -> None:
        self.api, self.reload = api, reload
        with ui.row().classes("items-end gap-4 w-full"):
            self.name = ui.input("Name (lowercase, e.g. shipments)").classes("w-64").mark("define-name")
            self.label = ui.input("Label").classes("w-64").mark("define-label")
            options = {"": "None: my own columns"} | {t.name: f"{t.label} ({t.name})" for t in templates}
            self.template = (
                ui.select(options, value="", label="Start from a built-in")
                .classes("w-64")
                .mark("define-template")
            )
        ui.label(
            "Columns (ignored with a template). Enum: the allowed values, separated by commas. Writable: what a "
            "proposed change may set."
        ).classes("text-sm text-grey-7")
        self.rows_box = ui.column().classes("w-full gap-1")
        self.rows: list[dict[str, Any]] = []
        with ui.row().classes("items-end gap-4"):
            ui.button("Add a column", icon="add", on_click=self.add_row).props("flat").mark(
                "define-add-column"
            )
            self.key = ui.input("Key column (unique per row)").classes("w-64").mark("define-key")
            ui.button("Define the dataset", on_click=self.submit).mark("define-submit")
        self.add_row()

    def add_row(self) -> None:
        with self.rows_box, ui.row().classes("items-end gap-2 w-full") as row:
            entry = {
                "name": ui.input("Column").props("dense").classes("w-48"),
                "kind": ui.select(KINDS, value="string", label="Kind").props("dense").classes("w-36"),
                "enum": ui.input("Enum (optional)").props("dense").classes("w-64"),
                "writable": ui.checkbox("Writable", value=True),
                "row": row,
            }
        self.rows.append(entry)

    async def submit(self) -> None:
        columns, writable = [], []
        for entry in self.rows:
            name = (entry["name"].value or "").strip()
            if not name:
                continue
            if entry["writable"].value:
                writable.append(name)
            enum = [v.strip() for v in (entry["enum"].value or "").split(",") if v.strip()]
            columns.append(
                {
                    "name": name,
                    "kind": entry["kind"].value,
                    "nullable": True,
                    "max_length": 1000 if entry["kind"].value == "string" else None,
                    "enum": enum or None,
                }
            )
        template = self.template.value or None
        body = DatasetBody.model_validate(
            {
                "name": (self.name.value or "").strip(),
                "label": (self.label.value or "").strip() or (self.name.value or "").strip(),
                "columns": [] if template else columns,
                "key_column": (self.key.value or "").strip(),
                "writable": None if template else writable,
                "template": template,
            }
        )
        made = await widgets.call(self.api.define_dataset(body))
        if made is FAILED:
            return
        ui.notify(f"Dataset {made.name} defined.", type="positive")  # type: ignore[attr-defined]
        result = self.reload()
        if hasattr(result, "__await__"):
            await result


# ------------------------------------------------------------------------------------------------ the import


class ImportPage:
    """One upload → (new dataset: confirm the columns) → dry run → import, each a job followed to its end."""

    def __init__(self, api: Api, name: str) -> None:
        self.api = api
        self.name = name
        self.folder = Path(tempfile.mkdtemp(prefix="cleanroom-console-import-"))
        self.file: Path | None = None
        self.filename = ""
        self.preview: Any = None  # the file's inferred columns, for a new dataset
        self.kind_selects: dict[str, ui.select] = {}
        self.admin = session.is_admin()
        ui.context.client.on_disconnect(self.discard)
        with ui.card().classes("w-full gap-2").mark("import-target"):
            ui.label("Into which dataset").classes("text-lg font-medium")
            with ui.row().classes("items-end gap-4"):
                self.target = (
                    ui.select({}, label="Dataset", value=None).classes("w-72").mark("import-dataset")
                )
                self.new_name = (
                    ui.input("New dataset's name (lowercase)").classes("w-72").mark("import-new-name")
                )
                self.new_name.set_visibility(self.admin)  # defining a dataset is an admin's
            ui.label(
                "Pick one of the company's datasets, or name a new one: its columns are then inferred from the "
                "file for you to confirm."
                if self.admin
                else "The company's datasets you may change (an admin grants edit on them)."
            ).classes("text-sm text-grey-7")
            from backend.settings import get_settings

            limit = min(get_settings().import_max_bytes, 2**31)
            ui.upload(
                label=f"CSV, XLSX or ODS (up to {widgets.human_bytes(limit)})",
                auto_upload=True,
                max_file_size=limit,
                on_upload=self.uploaded,
                on_rejected=lambda: ui.notify(
                    f"The file is over the {widgets.human_bytes(limit)} limit.", type="warning"
                ),
            ).props("accept=.csv,.xlsx,.ods hide-upload-btn").classes("w-full").mark("import-upload")
        self.columns_box = ui.column().classes("w-full gap-2").mark("import-columns")
        self.dry_box = ui.column().classes("w-full gap-2").mark("import-dry-run")
        self.apply_box = ui.column().classes("w-full gap-2").mark("import-apply")

    async def load(self) -> None:
        datasets = await widgets.call(self.api.datasets())  # with the caller's access to each
        names = (
            {}
            if datasets is FAILED
            else {
                d.name: f"{d.label} ({d.name})"
                for d in datasets  # type: ignore[union-attr]
                if d.origin == "company" and d.access == "edit"
            }
        )
        self.target.options = {"": "A new dataset", **names} if self.admin else names
        self.target.value = self.name if self.name in names else ("" if self.admin else None)
        if not self.admin and not names:
            with self.columns_box:
                ui.label(
                    "There is no dataset you may import into: a company admin can grant you edit on one."
                ).mark("import-nothing")
        self.target.update()

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def dataset(self) -> str:
        return self.target.value or (self.new_name.value or "").strip()

    async def uploaded(self, event: Any) -> None:
        upload = event.file
        for old in self.folder.iterdir():
            old.unlink()
        self.filename = upload.name
        self.file = self.folder / "upload"
        await upload.save(self.file)
        self.columns_box.clear()
        self.dry_box.clear()
        self.apply_box.clear()
        self.preview = None
        if not self.target.value and not self.admin:
            ui.notify("Pick the dataset to import into, then upload the file again.", type="warning")
            return
        if not self.target.value:
            with self.file.open("rb") as content:  # streamed to the API, never read whole here
                preview = await widgets.call(self.api.preview_import(self.filename, content))
            if preview is FAILED:
                return
            self.render_columns(preview)
        else:
            with self.columns_box:
                ui.label(f"{self.filename}: into {self.target.value}.").classes("text-sm")
        with self.dry_box:
            ui.button("Dry run", icon="rule", on_click=self.dry_run).mark("import-dry-run-button")

    def render_columns(self, preview: Any) -> None:
        self.kind_selects = {}
        with self.columns_box, ui.card().classes("w-full gap-2"):
            ui.label(
                f"Columns of {self.filename} ({preview.kind}, kinds inferred from {preview.sampled_rows:,} rows)"
            ).classes("text-lg font-medium")
            ui.label(
                "Correct a kind where the guess is wrong; nothing is written before the import."
            ).classes("text-sm text-grey-7")
            with ui.element("table").mark("import-kinds"):
                for column in preview.columns:
                    with ui.element("tr"):
                        with ui.element("td").classes("pr-4"):
                            ui.label(column.name).classes("cr-code")
                        with ui.element("td"):
                            self.kind_selects[column.name] = (
                                ui.select(KINDS, value=column.kind)
                                .props("dense options-dense")
                                .classes("w-36")
                                .mark(f"kind-{column.name}")
                            )
            names = [c.name for c in preview.columns]
            with ui.row().classes("items-end gap-4 w-full"):
                self.label = (
                    ui.input("Label", value=self.dataset.replace("_", " ").capitalize())
                    .classes("w-64")
                    .mark("import-label")
                )
                self.key = (
                    ui.select(names, value=names[0] if names else None, label="Key column")
                    .classes("w-48")
                    .mark("import-key")
                )
                self.writable = (
                    ui.select(
                        names, value=list(names), multiple=True, label="Writable (a proposed change may set)"
                    )
                    .props("use-chips")
                    .classes("grow")
                    .mark("import-writable")
                )
        self.preview = preview

    def new_spec(self) -> dict[str, Any] | None:
        if self.target.value:
            return None
        columns = []
        for column in self.preview.columns:
            kind = self.kind_selects[column.name].value
            columns.append(
                {
                    "name": column.name,
                    "kind": kind,
                    "nullable": True,
                    "max_length": (column.max_length or 1000) if kind == "string" else None,
                    "enum": column.enum,
                }
            )
        return {
            "label": self.label.value or self.dataset,
            "key_column": self.key.value,
            "columns": columns,
            "writable": list(self.writable.value or []),
        }

    async def start(self, dry_run: bool, box: ui.element, on_end: Callable[[DatasetJobInfo], Any]) -> None:
        if self.file is None or not self.dataset:
            ui.notify("Pick a dataset (or name a new one) and upload a file first.", type="warning")
            return
        if not self.target.value and self.preview is None:
            ui.notify(
                "For a new dataset, upload the file again to see and confirm its columns.", type="warning"
            )
            return
        with self.file.open("rb") as content:
            job = await widgets.call(
                self.api.start_import(
                    self.dataset, self.filename, content, dry_run=dry_run, new=self.new_spec()
                )
            )
        if job is FAILED:
            return
        box.clear()
        with box:
            view = JobView(self.api, "import-job" if not dry_run else "dry-run-job", on_end)
        view.follow(job)  # type: ignore[arg-type]

    async def dry_run(self) -> None:
        self.apply_box.clear()
        await self.start(True, self.dry_box, self.dry_ended)

    def dry_ended(self, job: DatasetJobInfo) -> None:
        with self.dry_box:
            if job.state == "done" and job.report is not None:
                report_view(job.report, "dry-run-report")
                ui.button("Import", icon="file_download_done", on_click=self.apply).props(
                    "color=positive"
                ).mark("import-apply-button")
            else:
                ui.button("Dry run again", on_click=self.dry_run).props("flat")

    async def apply(self) -> None:
        await self.start(False, self.apply_box, self.applied)

    def applied(self, job: DatasetJobInfo) -> None:
        with self.apply_box:
            if job.state == "done" and job.report is not None:
                report_view(job.report, "import-report")
                ui.link("Back to the datasets", "/datasets").mark("import-done")
                self.discard()
            else:
                ui.label("Nothing was applied. Correct the file and try again.").classes("text-sm")
