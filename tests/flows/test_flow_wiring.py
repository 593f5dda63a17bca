"""Flows follow their steps' ends because start-up says so (`progress.wire()`, called by the API's start-up and
by every worker's), not because some module happens to be imported: importing the whole backend hooks nothing,
and deleting an import cannot silently stop flows."""

from __future__ import annotations

import subprocess
import sys

import pytest
from litestar.testing import AsyncTestClient

from backend.app import create_app
from backend.execution import loop
from backend.flows import progress
from backend.runs import ended

pytestmark = pytest.mark.sqlite  # the start-up's wiring, not an engine's


@pytest.fixture
def unwired(monkeypatch: pytest.MonkeyPatch) -> list[ended.Hook]:
    hooks: list[ended.Hook] = []
    monkeypatch.setattr(ended, "_hooks", hooks)
    return hooks


def test_importing_the_backend_hooks_nothing() -> None:
    probe = (
        "import backend.app, backend.flows.service, backend.flows.progress, backend.execution, backend.fleet.service\n"
        "from backend.runs import ended\n"
        "print(len(ended._hooks))\n"
        "from backend.flows import progress\n"
        "progress.wire()\n"
        "print(len(ended._hooks))\n"  # control: the probe sees a hook once one is wired
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["0", "1"], out.stderr


def test_wiring_twice_hooks_once(unwired: list[ended.Hook]) -> None:
    progress.wire()
    progress.wire()
    assert unwired == [progress.step_ended]


async def test_the_api_wires_flows_when_it_starts(demo_db: str, unwired: list[ended.Hook]) -> None:
    app = create_app(database_url=demo_db, run_hooks=False)
    assert unwired == []  # assembling the app is not starting it
    async with AsyncTestClient(app=app):
        assert unwired == [progress.step_ended]


async def test_a_worker_wires_flows_when_it_starts(
    monkeypatch: pytest.MonkeyPatch, unwired: list[ended.Hook]
) -> None:
    async def nothing(*_: object) -> None:
        return None

    # no database, no sandbox: only the start itself
    for name in ("recover", "sweep_bundles"):
        monkeypatch.setattr(loop, name, nothing)
    monkeypatch.setattr(loop, "service_standby_count", lambda: 0)
    monkeypatch.setattr(loop, "stop_standby_pool", lambda: None)
    monkeypatch.setattr(loop.RunLoop, "_loop", nothing)
    worker = loop.RunLoop()
    await worker.start()
    try:
        assert unwired == [progress.step_ended]
    finally:
        await worker.stop()
