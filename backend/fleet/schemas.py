"""What the worker API under /api/worker accepts and answers: the wire between the API and a hypervisor
host's agent (`cleanroom worker`), which decodes these and nothing by hand."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class HostBody(BaseModel):
    libvirt_uri: str = Field(default="", max_length=200)
    virt_type: str = Field(default="", max_length=10)
    image_hash: str = Field(default="", max_length=64)
    capacity: int = Field(default=1, ge=1, le=256)


class HeartbeatBody(BaseModel):
    running: int = Field(default=0, ge=0)
    draining: bool = False
    # the runs the worker is working on; one it holds by the database and not by this list is settled
    holding: list[int] | None = Field(default=None, max_length=10_000)


class RefuseBody(BaseModel):
    problem: str = Field(max_length=2000)


class Registered(BaseModel):
    host_id: str
    settled_runs: int


class Job(BaseModel):
    """What a worker needs to run a claimed run: no bundle path, the bundle comes by `bundle_url`."""

    run_id: int
    code: str
    code_sha256: str
    approved_code_sha256: str | None
    approved_bundle_sha256: str | None
    approved_at: str | None
    manifest: dict[str, Any] | None
    limits: dict[str, Any]
    read_actions: bool
    bundle_url: str
    result_url: str
    carry_url: str | None = None  # a flow's step: what earlier steps handed on (its /work/flow), as a tar
    started_after: float | None = None  # a flow's step: no waiting guest older than this (unix seconds)
    request_id: str | None = (
        None  # the id of the API request that proposed it: the host logs the run under it
    )


class Done(BaseModel):
    ok: bool = True
    status: str | None = None
