"""Another company's runs and a sandbox health that would leak a host path (the tenant-isolation tests)."""

from __future__ import annotations

from backend.runs.tables import Run
from tests.support.http import token_for
from tests.support.runs import enable_code, proposal

SECRET_PATH = "/var/cache/cleanroom/images/secret-build-dir"


LIBVIRT_ERROR = "Failed to connect socket to '/var/run/libvirt/virtqemud-sock': acme-vm-17 busy"


async def _acme_runs(client, statuses: list[str]) -> None:
    """Acme's assistant proposes; the statuses are then set directly (this is about counting)."""
    await enable_code()
    token = await token_for(client, "alice@acme.example")
    for status in statuses:
        run = await client.post("/api/runs", json=proposal(), headers=token)
        assert run.status_code == 201, run.text
        await Run.update({Run.status: status}).where(Run.id == run.json()["id"])


def _fake_sandbox_health(monkeypatch) -> None:
    from backend import sandbox

    monkeypatch.setattr(
        sandbox,
        "health",
        lambda: {
            "virt_type": "kvm",
            "image": {"hash": "ab" * 32, "path": SECRET_PATH},
            "running_vms": 7,
            "libvirt_error": LIBVIRT_ERROR,
            "saved_state": {"enabled": True, "slots": 4, "ready": 1},
        },
    )
