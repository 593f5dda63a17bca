"""`convert_isolated()`: the same conversion in a child process with a hard wall-clock and memory ceiling.

The in-process deadline is cooperative: it is checked between rows, chunks and pages, so one
pathological PDF page (pdfplumber's table finder on a page with a million rules) can still run long.
The child runs in its own process group and is killed with everything it started (tesseract,
pdftoppm) when the ceiling passes; its address space is capped with RLIMIT_AS.

Protocol: stdin carries one JSON line {"filename", "limits"} followed by the file's bytes; stdout
carries the `Converted` as JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys

from backend.convert.model import Converted, ConvertLimits, Table

GRACE_SECONDS = 10.0  # interpreter start-up and serialisation on top of the conversion time limit
DEFAULT_MEMORY_BYTES = 2 * 1024**3


def convert_isolated(
    data: bytes,
    filename: str,
    *,
    limits: ConvertLimits | None = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    grace_seconds: float = GRACE_SECONDS,
) -> Converted:
    limits = limits or ConvertLimits.from_settings()
    header = json.dumps({"filename": filename, "limits": dataclasses.asdict(limits), "memory": memory_bytes})
    process = subprocess.Popen(
        [sys.executable, "-m", "backend.convert.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    )
    try:
        out, err = process.communicate(
            header.encode() + b"\n" + data, timeout=limits.time_limit_seconds + grace_seconds
        )
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.communicate()
        return Converted(
            error=f"Conversion took longer than the {limits.time_limit_seconds:g} s limit, so the file was not staged."
        )
    finally:
        if process.poll() is None:
            _kill_group(process)
    if process.returncode != 0 or not out:
        if process.returncode in (-signal.SIGKILL, -signal.SIGSEGV) or b"MemoryError" in err:
            return Converted(error="The file needs too much memory to convert and was not staged.")
        return Converted(
            error=f"The converter stopped unexpectedly (exit {process.returncode}); the file was not staged."
        )
    return from_json(out)


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def to_json(converted: Converted) -> bytes:
    return json.dumps(dataclasses.asdict(converted), ensure_ascii=False).encode("utf-8")


def from_json(raw: bytes) -> Converted:
    fields = json.loads(raw)
    fields["tables"] = [Table(**table) for table in fields.get("tables", [])]
    return Converted(**fields)


def main() -> None:
    import resource

    from backend.convert.service import convert

    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    memory = int(header.get("memory") or DEFAULT_MEMORY_BYTES)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    data = stdin.read()
    converted = convert(data, header["filename"], limits=ConvertLimits(**header["limits"]))
    sys.stdout.buffer.write(to_json(converted))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
