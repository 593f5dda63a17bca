"""Which findings an admin acknowledged "expected here" (backend/runs/acknowledge.py makes and withdraws them):
read by the run's detail, keyed by the company, the cell's sha256 and the column."""

from __future__ import annotations

from typing import Any

from backend.injection.schemas import Acknowledgement
from backend.staging.tables import InjectionAcknowledgement as Ack


async def attach(company_id: int, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings with `acknowledged` filled in where an acknowledgement of the company holds for their
    cell hash and column (one query)."""
    hashes = list({f["cell_sha256"] for f in findings if f.get("cell_sha256")})
    if not hashes:
        return findings
    rows = await Ack.select().where((Ack.company == company_id) & Ack.cell_sha256.is_in(hashes))
    held = {(r["cell_sha256"], r["column_name"]): r for r in rows}
    out = []
    for f in findings:
        r = held.get((f.get("cell_sha256"), f.get("column") or ""))
        if r is None:
            out.append(f)
        else:
            ack = Acknowledgement(
                id=r["id"], by=r["acknowledged_by"], at=r["acknowledged_at"], reason=r["reason"]
            )
            out.append({**f, "acknowledged": ack.model_dump()})
    return out
