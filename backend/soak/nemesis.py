"""The faults, each a function of the deployment that injects one and returns once the product has been
given what it needs to come back (a killed API is started again after a pause; a killed worker is started
again by `serve` itself; a filled disk is freed after a while).

`FAULTS` names them, `BY_MODE` says which a mode takes, `cleanroom soak --faults` chooses; without it a soak
uses `DEFAULT_BY_MODE`, which holds no `SHARED` fault. `restart_libvirtd` and `restart_postgres` strike what
the whole machine shares (every guest on it; every database of a PostgreSQL cluster, production's too), so
they run only when named in --faults, and `restart_postgres` only on a cluster that is the soak's own: the
cluster serving the soak's database must carry `OWN_CLUSTER_MARKER` in its data directory (a throwaway
cluster made for soaks, the README's "Fault soak"), and it is that cluster that is restarted, by its own
name (`cut_database` ends only the deployment's own database connections).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from backend.soak.deployment import Deployment, FleetDeployment

FILL_LEAVES_MIB = 4  # what a filled disk keeps free


def kill_api(dep: Deployment, rng: random.Random) -> str:
    dep.kill_api()  # its worker sees its parent gone, finishes its running VMs and exits
    time.sleep(rng.uniform(0.5, 4.0))
    dep.start()
    return f"API killed; started again ({dep.starts} starts)"


def kill_worker(dep: Deployment, rng: random.Random) -> str:
    return dep.kill_worker(rng)


def cut_database(dep: Deployment, rng: random.Random) -> str:
    """Every connection to the deployment's PostgreSQL database ended at once (a network cut, a failover):
    the API and the hosts must reconnect. Only this deployment's database: safe beside other suites."""
    from backend.benches.workers import _admin

    if not isinstance(dep, FleetDeployment):
        return "no database server here (skipped)"
    _admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dep.name}'")
    return f"connections to {dep.name} cut"


OWN_CLUSTER_MARKER = "cleanroom-soak-cluster"  # in a cluster's data directory: it is a soak's to restart


def server_cluster(url: str) -> dict[str, str]:
    """What the PostgreSQL server at `url` says of itself: its data directory and its cluster's name
    (Debian's `VERSION/NAME`). Needs a superuser, as the soak's database URL is."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        return {
            "data_directory": str(conn.execute("SHOW data_directory").fetchone()[0]),  # type: ignore[index]
            "cluster_name": str(conn.execute("SHOW cluster_name").fetchone()[0]),  # type: ignore[index]
        }


def own_cluster(server: dict[str, str]) -> tuple[str, str]:
    """(version, name) of the cluster `server` describes (`server_cluster`), if it is a soak's own: its data
    directory, on this machine, holds OWN_CLUSTER_MARKER. Anything else (production's cluster, the test
    suite's, a server on another machine, a data directory this user cannot read) is ValueError."""
    data = Path(server.get("data_directory") or "/nonexistent")
    version, _, name = (server.get("cluster_name") or "").partition("/")
    try:
        marked = (data / OWN_CLUSTER_MARKER).is_file()
    except OSError:
        marked = False
    if not marked:
        raise ValueError(
            f"restart_postgres restarts only a PostgreSQL cluster that is the soak's own, and the one serving "
            f"its database ({server.get('cluster_name') or '?'}, {data}) has no {OWN_CLUSTER_MARKER} in its data "
            "directory: point CLEANROOM_BENCH_POSTGRES_URL at a throwaway cluster made for soaks (the README's "
            "'Fault soak'), "
            "or leave restart_postgres out"
        )
    if not version or not name:
        raise ValueError(f"cannot tell which cluster serves the soak's database (cluster_name {server!r})")
    return version, name


def restart_postgres(dep: Deployment, rng: random.Random) -> str:
    """The soak's own PostgreSQL cluster restarted (every connection to it ends; opt-in, see the module)."""
    if not isinstance(dep, FleetDeployment):
        return "no database server here (skipped)"
    version, name = own_cluster(server_cluster(dep.env["DATABASE_URL"]))
    done = subprocess.run(
        ["pg_ctlcluster", version, name, "restart", "-m", "fast"],
        check=False,
        capture_output=True,
        text=True,
    )
    tail = ": " + done.stderr.strip()[-200:] if done.returncode else ""
    return f"PostgreSQL {version}/{name} restarted ({done.returncode}{tail})"


def restart_libvirtd(dep: Deployment, rng: random.Random) -> str:
    try:
        pid = int(Path("/run/libvirtd.pid").read_text().strip())
    except (OSError, ValueError):
        return "libvirtd not found (skipped)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    time.sleep(rng.uniform(0.2, 2.0))
    started = dep.cli("sandbox", "daemons", check=False)
    return f"libvirtd {pid} killed; daemons: {started.stdout.strip() or started.stderr.strip()[-200:]}"


def fill_disk(dep: Deployment, rng: random.Random) -> str:
    if not dep.tmpfs:
        return "no data disk of its own here (skipped)"
    filler = dep.data / "soak-filler"
    free = os.statvfs(dep.data)
    size = free.f_bavail * free.f_frsize - FILL_LEAVES_MIB * 1024 * 1024
    if size > 0:
        subprocess.run(["fallocate", "-l", str(size), str(filler)], check=False, capture_output=True)
    time.sleep(rng.uniform(3.0, 12.0))
    filler.unlink(missing_ok=True)
    return f"data disk filled to {FILL_LEAVES_MIB} MB free, then freed"


FAULTS: dict[str, Callable[[Deployment, random.Random], str]] = {
    "kill_api": kill_api,
    "kill_worker": kill_worker,
    "restart_libvirtd": restart_libvirtd,
    "fill_disk": fill_disk,
    "cut_database": cut_database,
    "restart_postgres": restart_postgres,
}
BY_MODE = {
    "embedded": ("kill_api", "kill_worker", "restart_libvirtd", "fill_disk"),
    "fleet": ("kill_api", "kill_worker", "restart_libvirtd", "fill_disk", "cut_database", "restart_postgres"),
}
# what the whole machine shares: only when named in --faults
SHARED = frozenset({"restart_libvirtd", "restart_postgres"})
DEFAULT_BY_MODE = {mode: tuple(f for f in faults if f not in SHARED) for mode, faults in BY_MODE.items()}


def chosen_faults(mode: str, faults: list[str] | None, admin_url: Callable[[], str]) -> list[str]:
    """The faults a soak of `mode` uses: those named (each the mode's), else the mode's default, which holds no
    shared fault. `restart_postgres` is refused (ValueError) unless the cluster at `admin_url()` is the
    soak's own (`own_cluster`), before anything is deployed."""
    chosen = list(faults or DEFAULT_BY_MODE[mode])
    unknown = sorted(set(chosen) - set(BY_MODE[mode]))
    if unknown:
        raise ValueError(f"fault(s) {', '.join(unknown)} not in mode {mode}: {', '.join(BY_MODE[mode])}")
    if "restart_postgres" in chosen:
        own_cluster(server_cluster(admin_url()))
    return chosen
