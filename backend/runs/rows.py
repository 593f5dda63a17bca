"""A run's whole row, as `Run.select().output(load_json=True)` reads it, in SQL composed once.

Piccolo builds its select of every column (57) anew at each call: three quarters of a run detail's CPU at
1,000 assistants, and the same again in the worker's claim and result. The columns, their names and the
JSON columns are the table's own, read at import; `tests/runs/test_run_row.py` compares the rows with
Piccolo's, type by type, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from piccolo.utils.encoding import load_json

from backend.runs.tables import Run

_COLUMNS = ", ".join(f'"run"."{c._meta.db_column_name}" AS "{c._meta.name}"' for c in Run._meta.columns)
_BY_ID = f'SELECT {_COLUMNS} FROM "{Run._meta.tablename}" "run" WHERE "run"."id" = {{}}'
_BY_ID_IN_COMPANY = _BY_ID + ' AND "run"."company" = {}'
_JSON = tuple(c._meta.name for c in Run._meta.json_columns)


async def whole_run(run_id: int, *, company_id: int | None = None) -> dict[str, Any] | None:
    """The run's row, or None; with `company_id`, only if the run is that company's."""
    if company_id is None:
        rows = await Run.raw(_BY_ID, run_id)
    else:
        rows = await Run.raw(_BY_ID_IN_COMPANY, run_id, company_id)
    if not rows:
        return None
    row = dict(rows[0])
    for name in _JSON:
        if row[name] is not None:
            row[name] = load_json(row[name])
    return row
