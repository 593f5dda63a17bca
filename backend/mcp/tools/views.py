"""From the API's schemas to the tools' models: the pieces runs and flows both show (staged data, findings,
output files, printed output, proposed changes)."""

from __future__ import annotations

from typing import Any

from backend.actions.schemas import ActionItemInfo
from backend.drive.schemas import DriveFileInfo
from backend.injection.schemas import Finding
from backend.mcp.api import CleanroomApi
from backend.mcp.tools.common import file_uri
from backend.mcp.tools.models import OutputFile, RunResult, StagedFile
from backend.runs.schemas import RunDetail
from backend.staging.manifest import Manifest, ManifestEntry

STDOUT_CAP = 32 * 1024  # characters of printed output returned inline (the console shows it all)


def _source(entry: ManifestEntry) -> str:
    source = entry.source
    if source.type == "dataset":
        return f"dataset {source.dataset}"
    if source.type == "drive_file":
        return f"Drive file {source.name} (id {source.drive_file_id})"
    return "staging metadata" if source.type == "cleanroom" else str(source.type or "")


def findings(run: RunDetail) -> list[Finding]:
    return list(run.findings)


def staged(run: RunDetail) -> list[StagedFile]:
    """What the run's bundle holds, as paths inside the run."""
    return [
        StagedFile(
            path="/work/input/" + e.path,
            source=_source(e),
            kind=e.kind,
            rows=e.rows,
            visible_total=e.visible_total,
            truncated=e.truncated,
            bytes=e.bytes,
        )
        for e in Manifest.of(run.manifest).files
    ]


def manifest_errors(run: RunDetail) -> list[dict[str, Any]]:
    """The Drive files that could not be staged, each as the manifest records it."""
    return [e.model_dump(exclude_unset=True) for e in Manifest.of(run.manifest).errors]


async def action_items(api: CleanroomApi, run: RunDetail) -> list[ActionItemInfo]:
    """The changes a run proposed (a person accepts or rejects each); none asked for when it proposed none."""
    if not run.action_items_count:
        return []
    return await api.action_items(run.id)


def output_file(run_id: int, f: DriveFileInfo, inline: bool = False) -> OutputFile:
    return OutputFile.model_validate(
        {**f.model_dump(), "type": f.kind or "file", "uri": file_uri(run_id, f.name), "inline": inline}
    )


def result_of(run: RunDetail) -> RunResult | None:
    """A run's exit code and printed output, cut at STDOUT_CAP characters (the console has it all)."""
    raw = run.result
    if raw is None:
        return None
    stdout = raw.stdout or ""
    return RunResult.model_validate(
        {
            **raw.model_dump(),
            "stdout": stdout[:STDOUT_CAP],
            "stderr": (raw.stderr or "")[:STDOUT_CAP],
            "returned_truncated": len(stdout) > STDOUT_CAP,
        }
    )
