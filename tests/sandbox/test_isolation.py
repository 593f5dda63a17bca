"""Isolation claims, each with a control that would fail if the protection were removed."""

from __future__ import annotations

import json

import pytest

from backend.sandbox.selftest import run_isolation_selftest

pytestmark = pytest.mark.vm  # real VMs: the serial group (tests/conftest.py SERIAL_PATHS)


def test_no_nic_guest_reaches_nothing_while_the_nic_control_reaches_the_host_listener() -> None:
    report = run_isolation_selftest()
    no_nic, control = report["no_nic"], report["positive_control"]
    assert no_nic["run_status"] == "succeeded", no_nic
    assert no_nic["probe"]["interfaces"] == ["lo"]
    assert no_nic["probe"]["tcp_host_listener"]["errno"] == "ENETUNREACH"
    assert no_nic["probe"]["udp_host_listener"]["ok"] is False
    assert no_nic["probe"]["dns"]["ok"] is False
    assert no_nic["host_listener_received"] == []
    assert no_nic["vm"]["nics"] == 0
    assert no_nic["passed"], json.dumps(no_nic, indent=2)
    # Positive control: same image, same probe, one user-mode NIC -> the host listener gets the token.
    assert control["vm"]["nics"] == 1
    assert control["probe"]["tcp_host_listener"]["ok"] is True, json.dumps(control, indent=2)
    assert any(r.startswith("tcp:") for r in control["host_listener_received"])
    assert len(control["probe"]["interfaces"]) > 1
    assert control["passed"]
    assert report["passed"]


def test_user_code_is_unprivileged_and_cannot_open_disks_or_console(run) -> None:
    code = """
import json, os
opened = {}
for dev in ["/dev/vda", "/dev/vdb", "/dev/vdc", "/dev/ttyS0", "/dev/console", "/dev/kmsg"]:
    try:
        os.close(os.open(dev, os.O_RDONLY))
        opened[dev] = "OPENED"
    except OSError as exc:
        opened[dev] = type(exc).__name__
try:
    os.setuid(0)
    became_root = True
except OSError:
    became_root = False
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "cwd": os.getcwd(), "opened": opened, "became_root": became_root,
                  "env": sorted(os.environ)}))
"""
    result = run(code)
    assert result.status == "succeeded", result
    seen = json.loads(result.stdout)
    assert seen["uid"] != 0 and seen["euid"] != 0 and seen["gid"] != 0
    assert seen["groups"] == []
    assert seen["became_root"] is False
    assert seen["cwd"] == "/work"
    assert "OPENED" not in seen["opened"].values(), seen["opened"]
    assert set(seen["env"]) <= {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "MPLBACKEND",
        "MPLCONFIGDIR",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",  # this run's own, from the job's seed
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LC_CTYPE",
    }
    assert result.vm.nics == 0
    assert result.vm.guest_interfaces == ["lo"]
