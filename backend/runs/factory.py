"""The one place a Run row is made: a proposal, a revision (the next attempt) and a schedule's firing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from piccolo.engine.postgres import PostgresEngine
from piccolo.querystring import QueryString

from backend import observe
from backend.credits.service import max_cost
from backend.hashing import sha256_text
from backend.runs import approval, queued
from backend.runs.quotas import bundle_bytes
from backend.runs.tables import Run, RunStatus
from backend.staging.service import StagedBundle


async def create_run(
    *,
    company_id: int,
    requested_by: int,
    conversation_id: str,
    title: str,
    plan: str,
    code: str,
    datasets: list[str],
    file_ids: list[int],
    limits: dict[str, int],
    bundle: StagedBundle,
    findings: list[dict[str, Any]],
    attempt: int = 1,
    root_run_id: int | None = None,
    previous_attempt_id: int | None = None,
    schedule_id: int | None = None,
    now: datetime | None = None,
    flow_id: int | None = None,
    flow_step: int | None = None,
    read_actions: bool = True,
    receives: list[dict[str, Any]] | None = None,
) -> Run:
    """Save a new run over a staged bundle. It waits for approval, except a schedule's firing: the
    schedule approved it (the code and the fresh bundle as staged now, its maximum cost reserved by the
    caller in this transaction), and it never reads an actions.json.
    A first attempt is the root of its own attempts. A flow's step (`flow_id`, `flow_step`) waits for its
    flow's approval; `read_actions` False is its `read` capability."""
    now = now or datetime.now(UTC)
    code_sha256 = sha256_text(code)
    run = Run(
        company=company_id,
        requested_by=requested_by,
        conversation_id=conversation_id,
        title=title,
        plan=plan,
        code=code,
        code_sha256=code_sha256,
        datasets=datasets,
        file_ids=file_ids,
        limits=limits,
        status=RunStatus.awaiting_approval,
        attempt=attempt,
        root_run_id=root_run_id,
        previous_attempt_id=previous_attempt_id,
        bundle_dir=str(bundle.directory),
        bundle_sha256=bundle.bundle_sha256,
        manifest=bundle.manifest,
        staged_bytes=bundle_bytes(bundle.manifest),
        findings=findings,
        created_at=now,
        updated_at=now,
        flow_id=flow_id,
        flow_step=flow_step,
        read_actions=read_actions,
        receives=receives or [],
        request_id=observe.current_request_id(),  # the worker logs its run under it (backend/observe.py)
    )
    if schedule_id is not None:  # approved by its schedule (backend/runs/approval.py), reading no actions
        run.schedule_id = schedule_id
        run.read_actions = False
        # its firing reserved its maximum cost (backend/runs/holds.py)
        approval.fired(
            run, company_id=company_id, schedule_id=schedule_id, reserved=max_cost(limits), now=now
        )
    if root_run_id is None:
        await _insert_as_its_own_root(run)
    else:
        await run.save()
    observe.count_findings(findings)
    if run.status == RunStatus.queued:
        queued.announce()
    return run


# The id a first attempt is given, drawn once for its `id` and its `root_run_id` in the one INSERT: on
# PostgreSQL the id sequence's next value (a CTE is evaluated once per statement); on SQLite the id SQLite
# would choose itself (an INTEGER PRIMARY KEY without AUTOINCREMENT: the largest id plus one), read by the
# INSERT that already holds the database's write lock.
_OWN_ID = '"new_run_id"'
_DRAW_ID_POSTGRES = (
    f"""WITH {_OWN_ID} AS (SELECT nextval(pg_get_serial_sequence('run', 'id')) AS "id") {{}}"""
)
_DRAW_ID_SQLITE = f"""WITH {_OWN_ID} AS (SELECT COALESCE(MAX("id"), 0) + 1 AS "id" FROM "run") {{}}"""


async def _insert_as_its_own_root(run: Run) -> None:
    """Insert a first attempt with `root_run_id` = its own id in one statement, one round trip (it was an
    INSERT and then an UPDATE of root_run_id)."""
    own = QueryString(f'(SELECT "id" FROM {_OWN_ID})')
    # both columns read the drawn id inside the statement (a SQL expression where Piccolo's types want an int)
    run.id = own  # type: ignore[assignment]
    run.root_run_id = own  # type: ignore[assignment]
    (insert,) = Run.insert(run).returning(Run.id).default_querystrings
    try:
        rows = await Run.raw(
            _DRAW_ID_POSTGRES if isinstance(Run._meta.db, PostgresEngine) else _DRAW_ID_SQLITE, insert
        )
    except BaseException:
        run.id = run.root_run_id = None
        raise
    run.id = run.root_run_id = rows[0]["id"]
    run._exists_in_db = True
