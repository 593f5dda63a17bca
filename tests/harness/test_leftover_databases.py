"""The suite's own leftovers: a test process that is gone leaves PostgreSQL databases behind (a killed run's
templates and test database); the next run drops them and never another live process's."""

from __future__ import annotations

import uuid

import pytest

from tests.support.databases import POSTGRES_URL, _admin_sql, _blocking, _owner, _sweep_leftover_databases

pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="PostgreSQL not configured")


def _names() -> set[str]:
    (rows,) = _blocking(lambda: _admin_sql("SELECT datname FROM pg_database"))
    return {r["datname"] for r in rows}


def test_a_gone_processs_databases_are_dropped_and_a_live_ones_kept() -> None:
    tag = uuid.uuid4().hex[:8]
    gone = f"t_4194999_1_{tag}"  # no process has this pid and start time
    gone_template = f"tpl_seeded_4194999_1_{tag}"
    live = f"t_{_owner()}_{tag}"  # this process's own: the control
    foreign = f"someone_elses_{tag}"  # not a test database's name at all
    for name in (gone, gone_template, live, foreign):
        _blocking(lambda name=name: _admin_sql(f'CREATE DATABASE "{name}"'))
    try:
        dropped = _sweep_leftover_databases()
        names = _names()
        assert gone not in names and gone_template not in names
        assert {gone, gone_template} <= set(dropped)
        assert live in names and foreign in names
    finally:
        for name in (gone, gone_template, live, foreign):
            _blocking(lambda name=name: _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
