from __future__ import annotations

from piccolo.columns import JSON, BigInt, ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.actions.status import ItemStatus
from backend.runs.tables import Run
from backend.tenancy.tables import Company

__all__ = ["ActionItem", "ItemStatus"]


class ActionItem(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    run = ForeignKey(references=Run, null=False, index=True)
    index = Integer()  # position in actions.json
    op = Varchar(length=10, default="")  # create | update ("" when the entry was unreadable)
    dataset = Varchar(length=40, default="")
    record_id = BigInt(null=True, default=None)
    changes = JSON(default={})
    before = JSON(null=True, default=None)
    staged_version = Integer(null=True, default=None)
    reason = Text(default="")
    raw = Text(default="")  # the entry as proposed, for invalid ones
    status = Varchar(length=10)  # an ItemStatus
    problem = Text(null=True, default=None)
    decided_by = Varchar(length=254, null=True, default=None)
    decided_at = Timestamptz(null=True, default=None)
    created_record_id = BigInt(null=True, default=None)


TABLES = [ActionItem]
