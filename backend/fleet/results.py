"""A worker's result, read as hostile input before the API files it.

A worker host runs hostile code; what it sends back is no more trusted than what a guest writes. The
in-process runner's result comes from `backend.sandbox.output.interpret`, which applies the output
policies; a worker's `SandboxResult` is re-checked here against those same policies, with the same
helpers (no second rule):
- printed output: re-capped with `cap_stream` (the marker once, when anything was cut);
- output files: the one safe-name rule (`safe_name`), unique, at most MAX_OUTPUT_FILES and
  MAX_OUTPUT_BYTES in total, a regular file in the received folder; size and sha256 are measured here,
  never taken from the worker;
- actions: discarded unread when the run may not propose any, else re-parsed with `parse_actions` (a list
  of objects within the cap and MAX_ACTIONS_BYTES, or none at all);
- the listed rejections and the error text: bounded as `interpret` bounds them.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from backend.hashing import sha256_bytes
from backend.sandbox.models import (
    MAX_ACTIONS_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_OUTPUT_FILES,
    OutputFile,
    RejectedFile,
    SandboxResult,
)
from backend.sandbox.output import (
    MAX_REJECTED_LISTED,
    STDERR_MARKER,
    STDOUT_MARKER,
    cap_stream,
    parse_actions,
    safe_name,
    stdout_cap,
)

MAX_ERROR_CHARS = 2000  # as `interpret` keeps a guest agent's error
MAX_INTERFACES = 64


def _recap(text: str, marker: str, truncated: bool = False) -> tuple[str, bool]:
    """`text` within the cap; an honest worker's own marker is taken off first so it appears once."""
    cap = stdout_cap()
    tail = marker.format(cap=cap)
    if text.endswith(tail):
        text, truncated = text[: -len(tail)], True
    return cap_stream(text.encode("utf-8", "replace"), cap, truncated=truncated, marker=marker)


def _read(out_dir: Path, name: str, budget: int) -> bytes | str:
    """The bytes of `out_dir/name` (a regular file, no link followed, within `budget`), or why not."""
    try:
        fd = os.open(out_dir / name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return "not in the result"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return "not a regular file"
        data = fh.read(budget + 1)
    if len(data) > budget:
        return f"over the {MAX_OUTPUT_BYTES} byte total output limit"
    return data


def revalidate(result: SandboxResult, out_dir: Path, *, read_actions: bool) -> SandboxResult:
    """A copy of a worker's `result` that keeps only what the output policies allow; the files it keeps
    are those under `out_dir` it names, measured here."""
    checked = result.model_copy(deep=True)
    checked.stdout, checked.stdout_truncated = _recap(result.stdout, STDOUT_MARKER, result.stdout_truncated)
    checked.stderr, _ = _recap(result.stderr, STDERR_MARKER)
    if checked.error is not None:
        checked.error = checked.error[:MAX_ERROR_CHARS]
    checked.vm.guest_interfaces = [str(i)[:32] for i in checked.vm.guest_interfaces][:MAX_INTERFACES]
    rejected = [
        RejectedFile(name=r.name[:300], reason=r.reason[:300])
        for r in result.rejected_files[:MAX_REJECTED_LISTED]
    ]

    files: list[OutputFile] = []
    total = 0
    for f in result.files:
        name = f.name
        reason: str | None = None
        if not safe_name(name) or name in {kept.name for kept in files}:
            reason = "unsafe or duplicate name"
        elif len(files) >= MAX_OUTPUT_FILES:
            reason = f"over the limit of {MAX_OUTPUT_FILES} files"
        else:
            data = _read(out_dir, name, MAX_OUTPUT_BYTES - total)
            if isinstance(data, str):
                reason = data
            else:
                total += len(data)
                files.append(OutputFile(name=name, size=len(data), sha256=sha256_bytes(data)))
        if reason and len(rejected) < MAX_REJECTED_LISTED:
            rejected.append(RejectedFile(name=str(name)[:300], reason=reason))
    checked.files = files

    if not read_actions:  # a run that may not propose changes: whatever came is dropped unread
        checked.actions_discarded = checked.actions_discarded or result.actions is not None
        checked.actions = None
    elif result.actions is not None:
        try:
            raw = json.dumps(result.actions).encode()
            if len(raw) > MAX_ACTIONS_BYTES:
                checked.actions, problem = None, f"actions.json is larger than {MAX_ACTIONS_BYTES} bytes"
            else:
                checked.actions, problem = parse_actions(raw)
        except (RecursionError, ValueError):  # nested past what the parser follows
            checked.actions, problem = None, "malformed actions.json: nested too deeply"
        if problem:
            rejected = [r for r in rejected if r.name != "actions.json"]
            rejected.append(RejectedFile(name="actions.json", reason=problem))
    checked.rejected_files = rejected
    return checked
