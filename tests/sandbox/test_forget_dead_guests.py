"""`daemons.forget_dead_guests`: libvirtd's records of our guests whose QEMU is gone are dropped before libvirtd
starts (a record naming a dead QEMU left a slot's domain `paused` for ever, so that slot's runs failed); a record
whose QEMU lives, and any other domain's record, stay."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from backend.sandbox.daemons import forget_dead_guests


def _record(state: Path, name: str, pid: int) -> None:
    (state / f"{name}.xml").write_text(
        f"<domstatus pid='{pid}'><domain><name>{name}</name></domain></domstatus>"
    )
    (state / f"{name}.pid").write_text(str(pid))


def test_records_of_our_guests_whose_qemu_is_gone_are_forgotten_and_live_ones_kept(tmp_path: Path) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()  # a pid no process has any more
    live_qemu = subprocess.Popen(  # a QEMU as libvirt starts one: its guest's name on its command line
        [
            "bash",
            "-c",
            f'exec -a qemu-system-x86_64 {sys.executable} -c "import time; time.sleep(60)" -name guest=cleanroom-run-slot1-d6ee159e,debug-threads=on',
        ]
    )
    other_guest = subprocess.Popen(  # the dead guest's pid reused by another guest's QEMU
        [
            "bash",
            "-c",
            f'exec -a qemu-system-x86_64 {sys.executable} -c "import time; time.sleep(60)" -name guest=cleanroom-run-slot7-d6ee159e,debug-threads=on',
        ]
    )
    not_qemu = subprocess.Popen(["sleep", "60"])  # the dead QEMU's pid taken by another program
    try:
        deadline = time.monotonic() + 10
        for proc in (live_qemu, other_guest):
            while (
                not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"qemu")
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)  # bash has not exec'd yet
        _record(tmp_path, "cleanroom-run-slot0-d6ee159e", finished.pid)
        _record(tmp_path, "cleanroom-run-slot1-d6ee159e", live_qemu.pid)
        _record(tmp_path, "cleanroom-run-slot2-d6ee159e", not_qemu.pid)
        _record(tmp_path, "cleanroom-run-slot4-d6ee159e", other_guest.pid)
        _record(tmp_path, "someone-elses-vm", finished.pid)
        (tmp_path / "cleanroom-run-slot3-d6ee159e.xml").write_text("<domstatus/>")  # no pid file at all
        forgotten = forget_dead_guests(tmp_path)
        assert forgotten == [
            "cleanroom-run-slot0-d6ee159e",
            "cleanroom-run-slot2-d6ee159e",
            "cleanroom-run-slot3-d6ee159e",
            "cleanroom-run-slot4-d6ee159e",
        ]
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == [
            "cleanroom-run-slot1-d6ee159e.pid",
            "cleanroom-run-slot1-d6ee159e.xml",  # its QEMU lives: libvirtd reconnects to it
            "someone-elses-vm.pid",
            "someone-elses-vm.xml",  # not ours: never touched
        ]
    finally:
        for proc in (live_qemu, other_guest, not_qemu):
            proc.kill()
            proc.wait()
    # once that QEMU is gone too, its record goes on the next pass, and only it
    assert forget_dead_guests(tmp_path) == ["cleanroom-run-slot1-d6ee159e"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["someone-elses-vm.pid", "someone-elses-vm.xml"]
