"""After a crash: our leftover domains and per-run files, told apart from a live process's by their owner.

Every domain carries `owner="pid:starttime"` in its metadata and every per-run directory an
`owner` file; a leftover is one whose owning process is gone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from backend.sandbox.domain import host_prefix
from backend.sandbox.image import current_image
from backend.sandbox.libvirt_conn import (
    connection,
    destroy_quietly,
    domain_owner,
    domains_owned_by,
    our_domains,
    owner_alive,
)
from backend.sandbox.slots import states_dir
from backend.settings import get_settings


def recover_leftovers() -> list[str]:
    """Destroy leftover `cleanroom-run-*` domains and delete per-run files (service start).

    A leftover is one whose owning process is gone; runs of another live process are left alone. A fleet
    worker looks only at its own host's names (`cleanroom-run-<host id>-*`).
    """
    removed: list[str] = []
    prefix = host_prefix()
    with connection() as conn:
        for dom in conn.listAllDomains():
            name = dom.name()
            if name.startswith(prefix) and not owner_alive(domain_owner(dom)) and destroy_quietly(conn, name):
                removed.append(f"domain {name}")
    for path in leftover_run_files(include_live=False):
        _remove(path)
        removed.append(f"files {path}")
    image = current_image()
    states = states_dir(image) if image else None
    if states is not None and states.is_dir():
        for path in [*states.glob("template-*"), *states.glob("*.partial")]:
            if path.is_dir() and owner_alive(_read_owner(path)):
                continue
            _remove(path)
            removed.append(f"files {path}")
    return removed


def leftover_run_files(include_live: bool = True, owner: str | None = None) -> list[Path]:
    """Per-run directories: all of them, only those of dead processes, or only those of `owner`."""
    run_dir = get_settings().effective_run_dir
    if not run_dir.is_dir():
        return []
    found = []
    for path in sorted(run_dir.iterdir()):
        if not path.name.startswith(host_prefix()):
            continue
        path_owner = _read_owner(path)
        if owner is not None and path_owner != owner:
            continue
        if not include_live and owner_alive(path_owner):
            continue
        found.append(path)
    return found


def running_domains(owner: str | None = None) -> list[str]:
    """Our domains in libvirt (only those run by `owner`, when given)."""
    with connection() as conn:
        return domains_owned_by(conn, owner) if owner else our_domains(conn)


def _read_owner(path: Path) -> str | None:
    try:
        return (path / "owner").read_text()
    except OSError:
        return None


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
