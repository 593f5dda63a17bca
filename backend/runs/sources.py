"""What a run's results are computed from: the datasets its printed output, output files, conclusion and
whatever it hands on are tagged with (`Run.source_datasets`, `DriveFile.source_datasets`). Who may read
what they tag is records/visibility.py's rule (`unreadable_sources`), and nothing else's."""

from __future__ import annotations

from typing import Any

from backend.drive import service as drive
from backend.drive.tables import DriveFile


async def staged_sources(run: dict[str, Any]) -> set[str]:
    """The datasets a run staged, and those its staged Drive files were computed from (an output staged
    into another run keeps its tags)."""
    names = set(run["datasets"] or [])
    if run["file_ids"]:
        for row in await DriveFile.select(DriveFile.source_datasets).where(
            (DriveFile.id.is_in(list(run["file_ids"]))) & (DriveFile.company == run["company"])
        ):
            names.update(drive.source_tags(row["source_datasets"]))
    return names


async def run_sources(run: dict[str, Any]) -> list[str]:
    """A run's sources as stored (a flow's step: its own and every earlier step's, from when it was handed
    its carry); for a run that never stored them, its staged sources."""
    stored = run.get("source_datasets")
    if stored is not None:
        return drive.source_tags(stored)
    return sorted(await staged_sources(run))
