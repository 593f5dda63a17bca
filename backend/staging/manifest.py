"""The manifest a run's bundle carries (`manifest.json`, and `RunDetail.manifest` in the API), as a schema its
readers validate it into: the console's approval screen and the MCP tools read its entries by attribute.

Staging writes it (`service.py`); every field a reader may meet is here, the rest is kept (`extra="allow"`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ManifestSource(_Open):
    type: str | None = None  # dataset | drive_file | cleanroom
    dataset: str | None = None
    drive_file_id: int | None = None
    name: str | None = None
    sha256: str | None = None


class ManifestEntry(_Open):
    """One staged file: its path under /work/input, where it came from, its size and hash."""

    path: str = ""
    sha256: str | None = None
    bytes: int | None = None
    source: ManifestSource = Field(default_factory=ManifestSource)
    kind: str | None = None
    rows: int | None = None
    visible_total: int | None = None  # a dataset export: the rows the user may see
    total_rows: int | None = None  # a converted table: its rows before the conversion limits
    truncated: bool | None = None
    sheet: str | None = None
    hidden: bool | None = None
    pages: int | None = None


class ManifestError(_Open):
    """A Drive file that could not be staged."""

    drive_file_id: int | None = None
    name: str | None = None
    kind: str | None = None
    error: Any = None


class ManifestWarning(_Open):
    """What a conversion could not do or read, said next to the manifest before approval."""

    drive_file_id: int | None = None
    name: Any = None
    warning: Any = None


class ScanSummary(_Open):
    """What the injection scan of a proposal asked of the verdict cache (backend/staging/verdict_store.py) and
    of tier 3 (backend/injection/encoder.py): the doubtful cells looked up and found, how many tier 3 judged,
    how many its budget left to tier 1, and its encoder time."""

    cells_looked_up: int = 0
    cache_hits: int = 0
    hit_rate: float | None = None
    fingerprint: str | None = None
    tier3_judged: int = 0
    tier3_unreached: int = 0
    tier3_ms: int = 0


class Manifest(_Open):
    files: list[ManifestEntry] = Field(default_factory=list)
    errors: list[ManifestError] = Field(default_factory=list)
    warnings: list[ManifestWarning] = Field(default_factory=list)
    bundle_sha256: str | None = None
    findings_count: int | None = None
    scan: ScanSummary | None = None
    row_cap: int | None = None
    requested_by: str | None = None

    @classmethod
    def of(cls, manifest: dict[str, Any] | None) -> Manifest:
        """A run's manifest (`RunDetail.manifest`, `{}` before anything was staged)."""
        return cls.model_validate(manifest or {})
