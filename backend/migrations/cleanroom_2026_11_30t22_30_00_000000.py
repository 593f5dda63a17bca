"""Runs, actions and credits without import cycles: a run keeps how many action items its actions.json
became, and a credit charge keeps the title of the run it charged (the usage report reads only its own
table). Written by hand (small, additive); the next migration fills both in for existing rows."""

from piccolo.columns.column_types import Integer, Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-11-30T22:30:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "run action item count, credit charge run title"

COLUMNS = [
    ("Run", "run", "action_items_count", Integer, params(0)),
    ("CreditCharge", "credit_charge", "run_title", Varchar, params("", length=200)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
