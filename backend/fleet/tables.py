"""Hypervisor hosts that run VMs for the service, and the tokens they enroll with."""

from __future__ import annotations

from piccolo.columns import Boolean, Integer, Timestamptz, Varchar
from piccolo.table import Table


class WorkerHost(Table):
    """One `cleanroom worker --host-id NAME` process: what it offers and when it last said it is alive."""

    host_id = Varchar(length=64, unique=True, index=True)
    libvirt_uri = Varchar(length=200, default="")
    virt_type = Varchar(length=10, default="")
    image_hash = Varchar(length=64, default="")
    capacity = Integer(default=1)
    running = Integer(default=0)
    draining = Boolean(default=False)
    started_at = Timestamptz()
    last_heartbeat = Timestamptz()
    lost_at = Timestamptz(null=True, default=None)  # set when its heartbeat expired; cleared when it returns


class WorkerToken(Table):
    """An enrollment token: only its hash is kept; it lets one host id fetch and report its own jobs."""

    host_id = Varchar(length=64, index=True)
    prefix = Varchar(length=16)
    token_hash = Varchar(length=64, unique=True, index=True)
    created_at = Timestamptz()
    created_by = Varchar(length=254, default="")
    last_used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)
    # the most VMs at once its host is offered runs for, set by the operator at enrollment: what the host says
    # at registration is capped by it (None: a token made before this existed, capped by `max_concurrent_vms`)
    capacity = Integer(null=True, default=None)


TABLES = [WorkerHost, WorkerToken]
