"""What `/api/health` and `/api/system/health` answer (no Piccolo: the console reads it through
`backend.client`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class WorkerState(BaseModel):
    host_id: str
    up: bool
    capacity: int
    running: int
    draining: bool
    heartbeat_age_seconds: float


class Health(BaseModel):
    status: Literal["ok"] = "ok"  # the API answers and its database is configured
    scope: Literal["public", "company"] = "public"
    virt_type: str | None = None  # kvm | qemu: how runs are isolated (the same for every company)
    image_hash: str | None = None
    runner_ok: bool | None = None  # False: the operator has something to fix (`cleanroom health`)
    queue_length: int | None = None  # the caller's company's runs only
    running_runs: int | None = None
    max_concurrent_vms: int | None = None
    # the operator's only (`cleanroom health`, `cleanroom workers list`): None for a company's caller
    workers: list[WorkerState] | None = None  # fleet workers (`cleanroom worker`)
    queue_depth_all: int | None = None  # queued runs of every company


class GuestEnvironment(BaseModel):
    """What a run's guest offers: the built image's manifest (`source: image`), or, on a host without a built
    image, what its recipe installs, read from the lock (`source: lock`)."""

    python: str  # the guest's CPython version
    packages: dict[str, str]  # every installed distribution (normalized name) -> version
    offered: list[
        str
    ]  # the packages the guest offers by name (the lock's requested ones, then the operator's)
    extras: list[str]  # the operator's extra packages (CLEANROOM_GUEST_REQUIREMENTS)
    source: Literal["image", "lock"]
    image_hash: str | None = None
