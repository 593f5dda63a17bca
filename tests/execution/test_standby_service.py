"""Standby guests in the service: the worker keeps restored guests waiting, an approved run takes one, the
pool refills, a guest serves one run only, a changed configuration retires waiting guests, and stopping
the worker leaves no VM behind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import libvirt
import pytest

from backend.execution.loop import RunLoop
from backend.sandbox import libvirt_conn
from backend.sandbox.standby import service_standby_count, standby_pool, standby_ready
from backend.settings import get_settings
from tests.support.http import approve_as
from tests.support.runs import proposal

pytestmark = [pytest.mark.vm, pytest.mark.sqlite]

CODE = "import os\nprint(os.urandom(8).hex())\n"


@pytest.fixture
def standby_on(monkeypatch):
    monkeypatch.setenv("CLEANROOM_STANDBY_IN_SERVICE", "on")
    monkeypatch.setenv("CLEANROOM_STANDBY_VMS", "1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_setting_decides_how_many_guests_wait(monkeypatch) -> None:
    for value, vms, expected in (("off", "2", 0), ("on", "2", 2), ("on", "0", 0)):
        monkeypatch.setenv("CLEANROOM_STANDBY_IN_SERVICE", value)
        monkeypatch.setenv("CLEANROOM_STANDBY_VMS", vms)
        get_settings.cache_clear()
        assert service_standby_count() == expected, (value, vms)
    # auto: only with the memory for the waiting guests next to the running ones
    monkeypatch.setenv("CLEANROOM_STANDBY_IN_SERVICE", "auto")
    monkeypatch.setenv("CLEANROOM_STANDBY_VMS", "2")
    get_settings.cache_clear()
    monkeypatch.setattr("backend.sandbox.standby._available_mib", lambda: 10**9)
    assert service_standby_count() == 2
    monkeypatch.setattr("backend.sandbox.standby._available_mib", lambda: 1024)
    assert service_standby_count() == 0
    get_settings.cache_clear()


async def _wait_ready(count: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while standby_ready() < count:
        assert time.monotonic() < deadline, "no standby guest became ready"
        await asyncio.sleep(0.2)


async def _finished(client, headers, run_id: int, timeout: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/api/runs/{run_id}", headers=headers)
        assert response.status_code == 200, response.text
        run = response.json()
        if run["status"] not in ("awaiting_approval", "queued", "running"):
            return run
        assert time.monotonic() < deadline, run["status"]
        await asyncio.sleep(0.2)


async def test_the_service_runs_on_standby_guests_and_leaves_none_behind(
    client, alice, acme_on, standby_on
) -> None:
    worker = RunLoop(poll_seconds=0.1)
    await worker.start()
    try:
        assert standby_pool.active
        await _wait_ready(1)
        # a waiting guest is paused: its vCPUs do not run (and cost nothing) until a run hands it its job
        with libvirt_conn.connection() as conn:
            (waiting,) = standby_pool.waiting()
            assert conn.lookupByName(waiting.name).state()[0] == libvirt.VIR_DOMAIN_PAUSED
        done = []
        for _ in range(2):
            run = (await client.post("/api/runs", json=proposal(code=CODE), headers=alice)).json()
            assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
            done.append(await _finished(client, alice, run["id"]))
            await _wait_ready(1)  # refilled in the background after each run
        for run in done:
            assert run["status"] == "succeeded", (run["error_message"], run["result"])
            assert run["result"]["vm"]["standby"] is True and run["result"]["vm"]["nics"] == 0
        first, second = (r["result"]["vm"] for r in done)
        assert first["run_id"] != second["run_id"]  # one guest, one run
        assert done[0]["result"]["stdout"] != done[1]["result"]["stdout"]

        # a changed configuration (here: the memory limit) retires the waiting guest instead of using it
        waiting = standby_pool.waiting()
        with libvirt_conn.connection() as conn:  # this process's guests (another checkout may run its own)
            before = libvirt_conn.domains_owned_by(conn, libvirt_conn.owner_token())
        assert any(vm.name in before for vm in waiting)
        current = get_settings().max_memory_mib
        get_settings().max_memory_mib = current + 256
        try:
            image, virt = waiting[0].image, waiting[0].virt_type
            assert standby_pool.take(image, virt) is None
            assert standby_ready() == 0
            # and without any run asking: the pool retires a stale guest on its own within seconds
            get_settings().max_memory_mib = current
            await _wait_ready(1)
            (stale,) = standby_pool.waiting()
            get_settings().max_memory_mib = current + 256
            deadline = time.monotonic() + 20
            while stale in standby_pool.waiting():
                assert time.monotonic() < deadline, "a stale standby guest was left waiting"
                await asyncio.sleep(0.2)
            assert stale.qemu_pid is not None
            while Path(f"/proc/{stale.qemu_pid}").exists():  # its QEMU is gone, not just out of the list
                assert time.monotonic() < deadline, "the stale guest's QEMU is still running"
                await asyncio.sleep(0.2)
        finally:
            get_settings().max_memory_mib = current
    finally:
        await worker.stop()
    assert not standby_pool.active and standby_ready() == 0
    with libvirt_conn.connection() as conn:
        left = [d for d in libvirt_conn.domains_owned_by(conn, libvirt_conn.owner_token()) if "slot" in d]
    assert left == [], left
