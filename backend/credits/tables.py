from __future__ import annotations

from piccolo.columns import ForeignKey, Integer, Real, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company, User


class CreditCharge(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    user = ForeignKey(references=User, null=False)
    run_id = Integer(index=True)
    run_title = Varchar(
        length=200, default=""
    )  # the run's title when it was charged (the usage report's line)
    # a flow's step: its flow, and the flow's title then (the usage report's flow line)
    flow_id = Integer(null=True, default=None, index=True)
    flow_title = Varchar(length=200, default="")
    credits = Real()
    vcpu_seconds = Real()
    gib_seconds = Real()
    at = Timestamptz()


TABLES = [CreditCharge]
