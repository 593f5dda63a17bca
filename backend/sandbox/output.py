"""What the guest wrote, read as hostile input: the one place a result record becomes a `SandboxResult`.

Each of these policies is decided here and nowhere else:
- printed output: at most `stdout_cap_bytes` of each stream (the agent stops collecting there; this
  module re-checks), followed by one marker line when anything was cut (`cap_stream`);
- `actions.json`: a list of objects (or `{"actions": [...]}`); more than `actions_cap()` of them
  rejects the whole file, nothing is kept partially (`parse_actions`);
- output files: flat, safe, unique names, at most MAX_OUTPUT_FILES files and MAX_OUTPUT_BYTES in total,
  written into the caller's folder without following links.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from backend.filemodes import PRIVATE_FILE
from backend.hashing import sha256_bytes
from backend.sandbox import wire
from backend.sandbox.models import (
    MAX_ACTIONS_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_OUTPUT_FILES,
    OutputFile,
    RejectedFile,
    RunLimits,
    SandboxResult,
    Timings,
    VmInfo,
)
from backend.settings import get_settings

STDOUT_MARKER = "\n[output truncated: only the first {cap} bytes are shown]\n"
STDERR_MARKER = "\n[error output truncated: only the first {cap} bytes are shown]\n"
MAX_REJECTED_LISTED = 120
MAX_PROCESSES = 256


def actions_cap() -> int:
    """How many actions one run may propose. A file with more is rejected whole (an operator setting)."""
    return get_settings().max_actions_per_run


def stdout_cap() -> int:
    return get_settings().stdout_cap_bytes


def guest_limits(limits: RunLimits) -> dict[str, int]:
    """The limits the guest agent enforces (and this module re-checks), as it reads them from the job."""
    return {
        "wall_seconds": limits.wall_seconds,
        "memory_mib": limits.memory_mib,
        "vcpus": limits.vcpus,
        "stdout_cap": stdout_cap(),
        "max_files": MAX_OUTPUT_FILES,
        "max_total_bytes": MAX_OUTPUT_BYTES,
        "max_actions_bytes": MAX_ACTIONS_BYTES,
        "max_processes": MAX_PROCESSES,
    }


def cap_stream(
    data: bytes, cap: int, *, truncated: bool = False, marker: str = STDOUT_MARKER
) -> tuple[str, bool]:
    """At most `cap` bytes of printed output as text, plus the marker when anything was cut.

    The text part never encodes to more than `cap` bytes (a replacement character takes three).
    """
    text = data[:cap].decode("utf-8", "replace")
    truncated = truncated or len(data) > cap
    if len(text.encode()) > cap:
        text, truncated = text.encode()[:cap].decode("utf-8", "ignore"), True
    return (text + marker.format(cap=cap) if truncated else text), truncated


def error_result(message: str, started: float, vm: VmInfo | None = None) -> SandboxResult:
    return SandboxResult(
        status="error",
        error=message,
        timings_ms=Timings(total=round((time.monotonic() - started) * 1000, 1)),
        vm=vm or VmInfo(nics=None),
    )


def interpret(
    guest: wire.GuestResult, nonce: str | None, vm: VmInfo, out_dir: Path, read_actions: bool
) -> SandboxResult:
    """Turn the guest's result into a SandboxResult; accepted files are written into `out_dir`."""
    record = guest.record
    if record.get("agent_error"):
        return SandboxResult(
            status="error", error=f"guest agent failed: {_short(record['agent_error'], 2000)}", vm=vm
        )
    if record.get("nonce") != nonce:
        return SandboxResult(status="error", error="the guest's result belongs to another job", vm=vm)
    interfaces = record.get("interfaces")
    vm.guest_interfaces = [_short(i, 32) for i in interfaces][:64] if isinstance(interfaces, list) else []
    cap = stdout_cap()
    stdout, truncated = cap_stream(guest.blob(0, cap), cap, truncated=bool(record.get("stdout_truncated")))
    stderr, _ = cap_stream(
        guest.blob(1, cap), cap, truncated=bool(record.get("stderr_truncated")), marker=STDERR_MARKER
    )
    exit_code = record.get("exit_code")
    exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    if record.get("timed_out"):
        status = "timed_out"
    elif number(record.get("oom_kills")) > 0:
        status = "out_of_memory"
    elif exit_code == 0:
        status = "succeeded"
    else:
        status = "failed"
    result = SandboxResult(
        status=status, exit_code=exit_code, stdout=stdout, stderr=stderr, stdout_truncated=truncated, vm=vm
    )
    rejected = record.get("rejected")
    for item in rejected if isinstance(rejected, list) else []:
        if isinstance(item, dict) and len(result.rejected_files) < MAX_REJECTED_LISTED:
            result.rejected_files.append(
                RejectedFile(name=_short(item.get("name")), reason=_short(item.get("reason")))
            )
    if record.get("actions_present"):
        if not read_actions:
            result.actions_discarded = True  # never read off the disk, let alone parsed
        else:
            result.actions, problem = parse_actions(guest.blob(2, MAX_ACTIONS_BYTES))
            if problem:
                result.rejected_files.append(RejectedFile(name="actions.json", reason=problem))
    _write_files(guest, record, Path(out_dir), result)
    return result


def run_timings(
    record: dict[str, Any], launched: float, ready_at: float, finished: float, started: float
) -> Timings:
    """Host-side start (job handed over → guest READY), the guest's own execute/collect, the total."""
    guest = record.get("timings_ms")
    guest = guest if isinstance(guest, dict) else {}
    now = time.monotonic()
    return Timings(
        start=round(((ready_at or finished) - launched) * 1000, 1),
        execute=number(guest.get("execute")),
        collect=round((now - finished) * 1000, 1) + number(guest.get("collect")),
        total=round((now - started) * 1000, 1),
    )


def parse_actions(raw: bytes) -> tuple[list | None, str | None]:
    """(actions, None) for a well-formed file within the cap; (None, reason) rejects the whole file."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"malformed actions.json: {_short(exc, 200)}"
    if isinstance(value, dict) and isinstance(value.get("actions"), list):
        value = value["actions"]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None, "malformed actions.json: expected a list of objects"
    limit = actions_cap()
    if len(value) > limit:
        return None, f"actions.json proposes {len(value)} actions; at most {limit} are allowed"
    return value, None


def safe_name(name: Any) -> bool:
    """A flat name Drive will store as it is: blank ones ("   ") and ones Drive would strip are refused here."""
    if not isinstance(name, str) or name.strip() in ("", ".", "..") or name == "actions.json":
        return False
    if name != name.strip():
        return False
    if "/" in name or "\\" in name or len(name.encode("utf-8", "replace")) > 200:
        return False
    return not any(ord(c) < 32 or ord(c) == 127 for c in name)


def number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _short(value: Any, limit: int = 300) -> str:
    return str(value)[:limit]


def _write_files(guest: wire.GuestResult, record: dict, out_dir: Path, result: SandboxResult) -> None:
    files = record.get("files")
    files = files if isinstance(files, list) else []
    out_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    seen: set[str] = set()
    for index, item in enumerate(files):
        name = item.get("name") if isinstance(item, dict) else None
        size = item.get("size") if isinstance(item, dict) else None
        reason = None
        if not safe_name(name) or name in seen:
            reason = "unsafe or duplicate name"
        elif len(result.files) >= MAX_OUTPUT_FILES:
            reason = f"over the limit of {MAX_OUTPUT_FILES} files"
        elif not isinstance(size, int) or size < 0 or total + size > MAX_OUTPUT_BYTES:
            reason = f"over the {MAX_OUTPUT_BYTES} byte total output limit"
        if reason:
            result.rejected_files.append(RejectedFile(name=_short(name), reason=reason))
            continue
        data = guest.blob(3 + index, MAX_OUTPUT_BYTES - total)
        if len(data) != size:
            result.rejected_files.append(
                RejectedFile(name=_short(name), reason="size does not match the record")
            )
            continue
        try:
            fd = os.open(out_dir / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            result.rejected_files.append(
                RejectedFile(name=name, reason=f"cannot write to the output folder: {exc}")
            )
            continue
        seen.add(name)
        total += size
        result.files.append(OutputFile(name=name, size=size, sha256=sha256_bytes(data)))
