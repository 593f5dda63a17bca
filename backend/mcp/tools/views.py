"""From the API's JSON to the tools' models: the pieces runs and flows both show (staged data, findings,
output files, printed output, proposed changes)."""

from __future__ import annotations

from typing import Any

from backend.actions.schemas import ActionItemInfo
from backend.injection.schemas import Finding
from backend.mcp.api import CleanroomApi
from backend.mcp.tools.common import file_uri
from backend.mcp.tools.models import OutputFile, RunResult, StagedFile

STDOUT_CAP = 32 * 1024  # characters of printed output returned inline (the console shows it all)


def _source(entry: dict[str, Any]) -> str:
    source = entry.get("source") or {}
    if source.get("type") == "dataset":
        return f"dataset {source.get('dataset')}"
    if source.get("type") == "drive_file":
        return f"Drive file {source.get('name')} (id {source.get('drive_file_id')})"
    return "staging metadata" if source.get("type") == "cleanroom" else str(source.get("type") or "")


def findings(run: dict[str, Any]) -> list[Finding]:
    return [Finding.model_validate(f) for f in run.get("findings") or []]


def staged(run: dict[str, Any]) -> list[StagedFile]:
    """What the run's bundle holds, as paths inside the run."""
    return [
        StagedFile(
            path="/work/input/" + str(e.get("path", "")),
            source=_source(e),
            kind=e.get("kind"),
            rows=e.get("rows"),
            visible_total=e.get("visible_total"),
            truncated=e.get("truncated"),
            bytes=e.get("bytes"),
        )
        for e in (run.get("manifest") or {}).get("files") or []
    ]


def manifest_errors(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("manifest") or {}).get("errors") or [])


async def action_items(api: CleanroomApi, run: dict[str, Any]) -> list[ActionItemInfo]:
    """The changes a run proposed (a person accepts or rejects each); none asked for when it proposed none."""
    if not run.get("action_items_count"):
        return []
    rows = await api.get(f"/api/runs/{run['id']}/action-items")
    return [ActionItemInfo.model_validate(i) for i in rows]


def output_file(run_id: int, f: dict[str, Any], inline: bool = False) -> OutputFile:
    return OutputFile.model_validate(
        {**f, "type": f.get("kind") or "file", "uri": file_uri(run_id, f["name"]), "inline": inline}
    )


def result_of(run: dict[str, Any]) -> RunResult | None:
    """A run's exit code and printed output, cut at STDOUT_CAP characters (the console has it all)."""
    raw = run.get("result") or None
    if not raw:
        return None
    stdout = str(raw.get("stdout") or "")
    return RunResult.model_validate(
        {
            **raw,
            "stdout": stdout[:STDOUT_CAP],
            "stderr": str(raw.get("stderr") or "")[:STDOUT_CAP],
            "returned_truncated": len(stdout) > STDOUT_CAP,
        }
    )
