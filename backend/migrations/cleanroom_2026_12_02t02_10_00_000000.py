"""What a run's results are computed from (`run.source_datasets`): its own staged data and, for a flow's
step, every earlier step's. Written by hand (small, additive); the next migration fills it in for flow
steps that ran before it and re-tags their outputs."""

from piccolo.columns.column_types import JSON

from backend.migrations._columns import add_columns, params

ID = "2026-12-02T02:10:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "run source datasets"

COLUMNS = [
    ("Run", "run", "source_datasets", JSON, params(None, null=True)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
