"""No overdraft: a run's reservation, its maximum cost held against the company's pool from its approval
until it is charged or ends unstarted. Written by hand (small, additive)."""

from piccolo.columns.column_types import Real

from backend.migrations._columns import add_columns, params

ID = "2026-12-02T11:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "run credit reservations"

COLUMNS = [
    ("Run", "run", "credits_reserved", Real, params(0.0)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
