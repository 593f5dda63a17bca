"""The staging benchmark runs end to end (small sizes here; `cleanroom bench staging` runs the real one) and
leaves the database and data directory it found."""

from __future__ import annotations

import pytest

from backend import db
from backend.benches import SUITES
from backend.benches.staging import bench_staging
from backend.settings import get_settings


@pytest.mark.sqlite
def test_bench_staging_small(demo_db: str) -> None:
    engine_before, data_dir_before = db.engine(), get_settings().data_dir
    result = bench_staging(repeats=2, target=120, cap=100)
    assert result["n"] == 2 and result["median_ms"] > 0 and result["p95_ms"] >= result["median_ms"]
    assert result["datasets"] == 12 and result["rows"] == 1200 and result["truncated_exports"] == 12
    assert result["cells"] > result["text_cells_scanned"] > 0
    assert result["findings"] == 1  # the planted instruction is found in the timed runs
    assert db.engine() is engine_before and get_settings().data_dir == data_dir_before


def test_bench_staging_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    import backend.benches.staging
    from backend.cli.staging import register

    app, bench_app = typer.Typer(), typer.Typer()
    register(app, bench_app)
    # the suite imports bench_staging when it runs (not when the CLI starts) and runs it with its defaults
    monkeypatch.setattr(backend.benches.staging, "bench_staging", lambda: {"ran": "bench_staging"})
    assert SUITES["staging"]() == {"ran": "bench_staging"}
    assert "staging" in {c.name for c in bench_app.registered_commands}
