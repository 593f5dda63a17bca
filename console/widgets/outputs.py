"""What a run printed and wrote: its timings, printed output and output files (previewed when small)."""

from __future__ import annotations

import base64
import json
from typing import Any

from nicegui import ui

from backend.drive.schemas import DriveFileInfo
from backend.runs.schemas import RunDetail, RunResult
from console.api import Api
from console.widgets.loading import FAILED, call, empty_state, error_box
from console.widgets.status import NO_OUTPUTS
from console.widgets.text import human_bytes, pre, reveal_invisible, section

PHASES = {"start": "VM start", "execute": "code"}  # the sandbox's timings_ms, as a reader names them


def timings_text(run: RunDetail) -> str:
    """How long a run took, from the sandbox's own timings, else from when it started and ended."""
    if run.result is not None:
        timings = run.result.timings_ms
        phases = [
            f"{label} {getattr(timings, key) / 1000:.1f} s"
            for key, label in PHASES.items()
            if getattr(timings, key)
        ]
        return f"took {timings.total / 1000:.1f} s" + (f" ({', '.join(phases)})" if phases else "")
    if run.started_at is None or run.finished_at is None:
        return ""
    return f"took {(run.finished_at - run.started_at).total_seconds():.1f} s"


def printed_output(result: RunResult) -> None:
    """What the code printed, its errors, and the output files the sandbox refused."""
    ui.label("Printed output").classes("font-medium")
    pre(result.stdout or "(nothing printed)").mark("stdout")
    if result.stdout_truncated:
        ui.label("Output was cut at the cap.").classes("text-warning")
    if result.stderr:
        ui.label("Errors (stderr)").classes("font-medium")
        pre(result.stderr).classes("text-red-9").mark("stderr")
    for rejected in result.rejected_files:
        error_box(f"output file {rejected.name} was refused: {rejected.reason}")


def pretty_json(value: Any) -> str:
    """A parsed JSON document (a flow step's conclusion), indented; its strings are the code's text, so
    invisible characters in them are shown."""
    return reveal_invisible(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str))


PREVIEW_LIMIT = 8 * 1024 * 1024


async def outputs_section(run: RunDetail, api: Api) -> None:
    files = run.output_files
    if not files and run.status in NO_OUTPUTS:
        return
    with section("Output files (in Drive)", "folder_open", "outputs"):
        if not files:
            empty_state("The run wrote no files.", "draft")
            return
        for payload in files:
            await output_file(payload, api)


async def output_file(payload: DriveFileInfo, api: Api) -> None:
    with ui.column().classes("w-full gap-1 border rounded p-2").mark("output-file"):
        with ui.row().classes("items-center gap-3"):
            ui.icon("image" if payload.kind == "image" else "description")
            ui.label(reveal_invisible(payload.name or "?")).classes("font-medium").mark("output-name")
            ui.label(human_bytes(payload.size)).classes("text-grey-7 text-sm")
            ui.label(str(payload.sha256)[:12]).classes("text-grey-7 text-xs font-mono")

            async def download() -> None:
                got = await call(api.file_content(payload.id))
                if got is not FAILED:
                    content, media_type = got  # type: ignore[misc]
                    ui.download.content(content, payload.name, media_type)

            ui.button(icon="download", on_click=download).props("flat dense round").tooltip("Download")
        if payload.kind == "image" and (payload.size or 0) <= PREVIEW_LIMIT:
            try:
                content, media_type = await api.file_content(payload.id)
            except Exception as exc:  # noqa: BLE001 - a preview is optional; say why it is missing
                ui.label(f"no preview: {getattr(exc, 'message', exc)}").classes("text-grey-7 text-sm")
                return
            if not media_type.startswith("image/"):
                media_type = "image/png"
            data_url = f"data:{media_type};base64,{base64.b64encode(content).decode()}"
            ui.image(data_url).props("no-transition no-spinner").classes("max-w-3xl border").mark("preview")
