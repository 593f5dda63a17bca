"""One way to decide something that waits (a run, a flow, an action item): a conditional write. Of two
decisions sent at once exactly one matches the row still waiting; the other is told 409 and writes nothing
(inside the caller's transaction, which then rolls back whatever it began, its audit entry included)."""

from __future__ import annotations

from typing import Any

from piccolo.columns import Column
from piccolo.table import Table

from backend.errors import Conflict


async def claim(
    table: type[Table], row_id: int, values: dict[Any, Any], *, status: Column, waiting: Any, lost: str
) -> None:
    """Write `values` to row `row_id` only while its `status` is still `waiting`; Conflict(`lost`) if not."""
    claimed = await table.update(values).where((table.id == row_id) & (status == waiting)).returning(table.id)
    if not claimed:
        raise Conflict(lost)
