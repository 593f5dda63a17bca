"""The sandbox's tests. The guest agent as a module: loaded from its path without running `main()` (it is PID 1
only in a VM). Real VMs (QEMU/KVM through libvirt), for the files marked `vm`: the image and its warm saved
states are made once per image; every such test then checks that no `cleanroom-run-*` domain and no per-run
file is left behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from backend.sandbox import RunLimits, SandboxResult, ensure_image, prepare_saved_states, run_code
from backend.sandbox.libvirt_conn import owner_token
from backend.sandbox.recovery import leftover_run_files, running_domains
from tests.support.guest import load_guest_agent


@pytest.fixture(scope="session")
def guest_agent() -> ModuleType:
    return load_guest_agent()


@pytest.fixture(scope="session")
def sandbox_image() -> None:
    ensure_image(progress=lambda _msg: None)
    prepare_saved_states(progress=lambda _msg: None)


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """For a real-VM test (marked `vm`): the image and its saved states are ready before it, and no domain or
    per-run file is left after it. The folder's other tests (the agent, the wire format, the domain XML) start
    no VM."""
    if request.node.get_closest_marker("vm") is None:
        yield
        return
    request.getfixturevalue("sandbox_image")
    yield
    # Only this process's VMs: other processes on a shared host may be running their own.
    me = owner_token()
    # A finished run's QEMU is killed before run_code returns; libvirt drops its record within ~0.2 s.
    deadline = time.monotonic() + 3
    while running_domains(owner=me) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_domains(owner=me) == [], "a cleanroom-run-* domain outlived its run"
    assert leftover_run_files() == [], "per-run files outlived their run"


@pytest.fixture
def run(tmp_path: Path):
    counter = iter(range(1000))

    def _run(
        code: str,
        *,
        wall: int = 30,
        memory_mib: int = 2048,
        input_dir: Path | None = None,
        out: Path | None = None,
        **kwargs,
    ) -> SandboxResult:
        out = out or tmp_path / f"out{next(counter)}"
        limits = RunLimits(wall_seconds=wall, memory_mib=memory_mib)
        return run_code(code, input_dir=input_dir, out_dir=out, limits=limits, **kwargs)

    return _run
