"""What a caller passes to a run and what it gets back (the `sandbox exec --json` object)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.settings import get_settings

MAX_OUTPUT_FILES = 20
MAX_OUTPUT_BYTES = 50 * 1000 * 1000
MAX_ACTIONS_BYTES = 1000 * 1000

Status = Literal["succeeded", "failed", "timed_out", "out_of_memory", "error"]


@dataclass(frozen=True)
class RunLimits:
    """Per-run limits. A caller may lower them; the operator caps in settings always win."""

    wall_seconds: int = 120
    memory_mib: int = 2048
    vcpus: int = 2

    def clamped(self) -> RunLimits:
        s = get_settings()
        return replace(
            self,
            wall_seconds=max(1, min(self.wall_seconds, s.max_wall_seconds)),
            memory_mib=max(128, min(self.memory_mib, s.max_memory_mib)),
            vcpus=max(1, min(self.vcpus, s.max_vcpus)),
        )


class OutputFile(BaseModel):
    name: str
    size: int
    sha256: str


class RejectedFile(BaseModel):
    name: str
    reason: str


class Timings(BaseModel):
    start: float = 0.0
    execute: float = 0.0
    collect: float = 0.0
    total: float = 0.0
    # when the host saw the guest READY (Unix ms, the host's clock): the user code starts right after. The
    # guest's own clock cannot time that from outside under software emulation, where it runs slow.
    ready_unix_ms: float | None = None


class VmInfo(BaseModel):
    virt_type: str = "qemu"
    nics: int | None = None
    guest_interfaces: list[str] = Field(default_factory=list)
    image_hash: str | None = None
    domain_name: str | None = None
    run_id: str | None = None
    restored: bool = False
    standby: bool = False  # restored ahead of the request by the standby pool
    restore_ms: float | None = None
    qemu_pid: int | None = None  # the host process that was this VM
    qemu_started_unix: float | None = None  # when that process began (unix seconds, host clock)
    nonce: str | None = None  # the job's nonce, which the guest echoed in its result


class SandboxResult(BaseModel):
    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    files: list[OutputFile] = Field(default_factory=list)
    rejected_files: list[RejectedFile] = Field(default_factory=list)
    actions: list[Any] | None = None
    actions_discarded: bool = False
    timings_ms: Timings = Field(default_factory=Timings)
    vm: VmInfo = Field(default_factory=VmInfo)
    error: str | None = None
