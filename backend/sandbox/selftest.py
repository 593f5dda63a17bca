"""The isolation self-test: one probe, run (a) in a normal no-NIC guest and (b) with a user-mode NIC.

(b) is the positive control: the same probe must reach a listener on the host's loopback
(slirp maps 10.0.2.2 to it). If (b) fails, the probe could not notice a regression in (a).
"""

from __future__ import annotations

import errno
import json
import secrets
import socket
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.sandbox.models import RunLimits, SandboxResult
from backend.sandbox.runner import _run

PROBE = r"""
import errno, json, os, socket

HOST, TCP_PORT, UDP_PORT, TOKEN = {host!r}, {tcp_port}, {udp_port}, {token!r}


def attempt(fn):
    try:
        return {{"ok": True, "detail": fn()}}
    except OSError as exc:
        code = exc.errno if isinstance(exc.errno, int) and exc.errno > 0 else None
        return {{"ok": False, "errno": errno.errorcode.get(code) if code else None, "detail": str(exc)}}


def tcp(host, port):
    def go():
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(TOKEN.encode())
        sock.close()
        return "connected"
    return go


def udp():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5)
    sock.sendto(TOKEN.encode(), (HOST, UDP_PORT))
    data, _ = sock.recvfrom(200)
    return data.decode()


def dns():
    return socket.getaddrinfo("deb.debian.org", 80)[0][4][0]


print(json.dumps({{
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "tcp_host_listener": attempt(tcp(HOST, TCP_PORT)),
    "tcp_internet": attempt(tcp("1.1.1.1", 443)),
    "udp_host_listener": attempt(udp),
    "dns": attempt(dns),
    "uid": os.getuid(),
}}))
"""
SLIRP_HOST = "10.0.2.2"


@dataclass
class Listener:
    """TCP and UDP listeners on host loopback; records every token that reaches them."""

    tcp: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    udp: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    received: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Listener:
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._serve_tcp, self._serve_udp)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2)
        self.tcp.close()
        self.udp.close()

    @property
    def ports(self) -> tuple[int, int]:
        return self.tcp.getsockname()[1], self.udp.getsockname()[1]

    def _serve_tcp(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append("tcp:" + conn.recv(200).decode(errors="replace"))
                except OSError:
                    self.received.append("tcp:")

    def _serve_udp(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.udp.recvfrom(200)
            except (TimeoutError, OSError):
                continue
            self.received.append("udp:" + data.decode(errors="replace"))
            self.udp.sendto(b"echo:" + data, peer)


def _half(with_nic: bool) -> dict[str, Any]:
    token = secrets.token_hex(8)
    with Listener() as listener, tempfile.TemporaryDirectory(prefix="cleanroom-selftest-") as out:
        tcp_port, udp_port = listener.ports
        code = PROBE.format(host=SLIRP_HOST, tcp_port=tcp_port, udp_port=udp_port, token=token)
        result: SandboxResult = _run(
            code,
            input_dir=None,
            out_dir=Path(out),
            limits=RunLimits(wall_seconds=60),
            read_actions=False,
            positive_control_nic=with_nic,
        )
        reached = [r for r in listener.received if r.endswith(token)]
    probe: dict[str, Any] = {}
    if result.status == "succeeded":
        try:
            probe = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            probe = {}
    half = {
        "nic_attached": with_nic,
        "run_status": result.status,
        "run_error": result.error,
        "vm": result.vm.model_dump(),
        "probe": probe,
        "host_listener_received": reached,
        "stderr": result.stderr[-2000:],
    }
    if with_nic:
        tcp_ok = bool(probe.get("tcp_host_listener", {}).get("ok")) and any(
            r.startswith("tcp:") for r in reached
        )
        half["passed"] = tcp_ok and result.vm.nics == 1
        half["expectation"] = (
            "TCP connect to the host-loopback listener succeeds (and the listener sees the token)"
        )
    else:
        unreachable = {"ENETUNREACH"}
        tcp = probe.get("tcp_host_listener", {})
        udp = probe.get("udp_host_listener", {})
        half["passed"] = bool(
            probe
            and probe.get("interfaces") == ["lo"]
            and not tcp.get("ok")
            and tcp.get("errno") in unreachable
            and not probe.get("tcp_internet", {}).get("ok")
            and not udp.get("ok")
            and not probe.get("dns", {}).get("ok")
            and not reached
            and result.vm.nics == 0
            and result.vm.guest_interfaces == ["lo"]
        )
        half["expectation"] = (
            "only lo; TCP/UDP fail with ENETUNREACH; no resolver; libvirt shows 0 interfaces"
        )
    return half


def run_isolation_selftest() -> dict[str, Any]:
    """Both halves at once: each has its own listener and token, so neither can see the other's probe
    (the control's cold boot is most of the wait; the no-NIC guest restores beside it)."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="selftest") as pool:
        halves = [pool.submit(_half, with_nic=flag) for flag in (False, True)]
        no_nic, with_nic = (half.result() for half in halves)
    return {
        "passed": bool(no_nic["passed"] and with_nic["passed"]),
        "no_nic": no_nic,
        "positive_control": with_nic,
        "errno_meaning": {"ENETUNREACH": errno.ENETUNREACH},
    }
