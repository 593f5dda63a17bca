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
    credits = Real()
    vcpu_seconds = Real()
    gib_seconds = Real()
    at = Timestamptz()


TABLES = [CreditCharge]
