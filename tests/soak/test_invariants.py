"""The soak's invariants can fail: each is shown a history that breaks it (the hostile case: a run started
twice, a charge without a start, half an approval, a change applied twice or after a rejection, a charge
missing from the trail) next to one that keeps it."""

from __future__ import annotations

import json
import sqlite3

from backend.soak import invariants


def _db(charges: list[tuple[int, int, float]] = (), tasks: list[str] = (), items=()) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE credit_charge (run_id INTEGER, company INTEGER, credits REAL)")
    db.execute("CREATE TABLE task (title TEXT)")
    db.execute("CREATE TABLE action_item (id INTEGER, status TEXT, changes TEXT)")
    db.executemany("INSERT INTO credit_charge VALUES (?, ?, ?)", charges)
    db.executemany("INSERT INTO task VALUES (?)", [(t,) for t in tasks])
    db.executemany(
        "INSERT INTO action_item VALUES (?, ?, ?)", [(i, s, json.dumps({"title": t})) for i, s, t in items]
    )
    return db


def _entry(action: str, subject: int | str, company: int = 1, **data) -> dict:
    return {"action": action, "subject_id": str(subject), "company_id": company, "data": data}


def _run(run_id: int, status: str = "succeeded", approved: bool = True, flow_id=None) -> dict:
    return {"id": run_id, "status": status, "approved_at": "t" if approved else None, "flow_id": flow_id}


def test_a_run_started_or_charged_twice_or_charged_unstarted_is_found() -> None:
    runs = [_run(1), _run(2), _run(3), _run(4, "rejected", approved=False)]
    audit = [
        _entry("run.started", 1),
        _entry("run.started", 2),
        _entry("run.started", 2),  # executed twice
        _entry("run.started", 4),  # started though rejected
    ]
    db = _db(charges=[(1, 1, 1.0), (3, 1, 1.0)])  # run 3 charged without a start
    found = invariants.started_and_charged_once(runs, audit, db)
    assert {(v["invariant"], v["run"]) for v in found} == {
        ("no run executed twice", 2),
        ("no charge for a run that never started", 3),
        ("only approved runs start", 4),
    }
    db = _db(charges=[(1, 1, 1.0), (1, 1, 1.0)])
    assert [v["invariant"] for v in invariants.started_and_charged_once([_run(1)], audit[:1], db)] == [
        "no run charged twice"
    ]
    assert (
        invariants.started_and_charged_once([_run(1)], audit[:1], _db(charges=[(1, 1, 1.0)])) == []
    )  # control


def test_half_an_approval_is_found() -> None:
    audit = [_entry("run.approved", 1), _entry("run.followup_auto_approved", 5), _entry("schedule.fired", 7)]
    runs = [
        _run(1),  # whole: row and trail agree
        _run(2),  # approved in its row, nothing in the trail
        _run(3, "awaiting_approval", approved=False),  # whole: neither
        _run(4, "rejected", approved=True),  # rejected yet approved
        _run(5),  # a follow-up the rule let through: whole
        _run(6, "waiting", flow_id=9),  # a flow's step: approved with its flow
        _run(7),  # a schedule's firing: whole
    ]
    found = invariants.approvals_whole(runs, audit)
    assert sorted({v["run"] for v in found}) == [2, 4]
    assert invariants.approvals_whole([_run(1), _run(5), _run(7)], audit) == []  # control


def test_a_change_applied_twice_or_after_rejection_is_found() -> None:
    items = [(1, "accepted", "a"), (2, "accepted", "b"), (3, "rejected", "c"), (4, "pending", "d")]
    tasks = ["a", "b", "b", "c"]  # b made twice, c made though rejected
    audit = [_entry("action.accepted", 1), _entry("action.accepted", 2)]
    found = invariants.items_applied_once(audit, _db(tasks=tasks, items=items))
    assert sorted(v["item"] for v in found) == [2, 3]
    ok = _db(tasks=["a"], items=[(1, "accepted", "a"), (3, "rejected", "c")])
    assert invariants.items_applied_once(audit[:1], ok) == []  # control


def test_credits_used_must_equal_the_charges_in_the_trail() -> None:
    db = _db(charges=[(1, 1, 2.5), (2, 1, 1.0)])
    trail = [_entry("credits.charged", 1, credits=2.5)]
    (found,) = invariants.credits_match_the_trail(trail, db)
    assert found["used"] == 3.5 and found["trail"] == 2.5
    trail.append(_entry("credits.charged", 2, credits=1.0))
    assert invariants.credits_match_the_trail(trail, db) == []  # control


def test_an_unsettled_run_is_found() -> None:
    runs = [_run(1), _run(2, "queued"), _run(3, "running"), _run(4, "awaiting_approval", approved=False)]
    assert [v["run"] for v in invariants.settled(runs)] == [2, 3]


def test_the_time_to_settle_counts_each_run_that_ended_after_the_last_fault() -> None:
    """SQLite's ISO text and PostgreSQL's datetimes alike; a run that ended before the fault is not counted."""
    from datetime import UTC, datetime

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE run (id INTEGER, finished_at TEXT)")
    fault = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC).timestamp()
    db.executemany(
        "INSERT INTO run VALUES (?, ?)",
        [
            (1, "2026-12-02T11:59:50+00:00"),  # before the fault: not counted
            (2, "2026-12-02T12:00:04+00:00"),
            (3, "2026-12-02 12:00:30"),  # without a zone: UTC, as the product writes it
            (4, None),  # still running
        ],
    )

    class Dep:
        def connect(self):
            return db

    assert invariants.times_to_settle(Dep(), fault) == [4.0, 30.0]
    assert invariants._unix(datetime(2026, 12, 2, 12, 0, 4, tzinfo=UTC)) == fault + 4
