"""`cleanroom soak` strikes only its own deployment unless told otherwise (issue 52, D-L8).

As the operator who types `cleanroom soak` on a machine that also serves production: the default fault set of
either mode holds no fault on what the machine shares (libvirtd, a PostgreSQL cluster), and the soak really
uses that set; `restart_postgres`, even when named, is refused before anything is deployed when the cluster
serving the soak's database is the suite's shared one (a cluster that serves others, as production's would),
and the fault itself re-checks and restarts nothing there. Controls: a shared fault named in --faults is used;
a cluster marked as the soak's own is accepted, and it is that cluster, by its name, that is restarted.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from backend.soak import nemesis, runner
from backend.soak.deployment import FleetDeployment
from tests.support.databases import POSTGRES_URL


def _no_server() -> str:
    raise AssertionError("the default faults must not need the database server")


class _Used(Exception):
    pass


def _faults_a_soak_uses(monkeypatch: pytest.MonkeyPatch, mode: str, faults: list[str] | None) -> list[str]:
    """The faults `runner.soak` hands its nemesis, with a deployment that does nothing."""
    seen: list[str] = []

    class Quiet:
        root, tmpfs, starts, exits = Path("/nonexistent"), False, 0, 0

        def seed(self) -> None: ...

        def start(self) -> None: ...

        def kill_api(self) -> None: ...

        def remove(self) -> None: ...

    def nemesis_of(dep, chosen, *args) -> None:
        seen.extend(chosen)
        raise _Used

    monkeypatch.setitem(runner.MODES, mode, Quiet)
    monkeypatch.setattr(runner, "Nemesis", nemesis_of)
    with pytest.raises(_Used):
        runner.soak(1, 1, mode, faults, progress=lambda line: None)
    return seen


def test_the_default_faults_strike_no_shared_service(monkeypatch: pytest.MonkeyPatch) -> None:
    for mode in nemesis.BY_MODE:
        chosen = nemesis.chosen_faults(mode, None, _no_server)
        assert chosen and not set(chosen) & nemesis.SHARED, (mode, chosen)
        assert not set(_faults_a_soak_uses(monkeypatch, mode, None)) & nemesis.SHARED
    assert {"restart_libvirtd", "restart_postgres"} <= nemesis.SHARED
    assert "cut_database" in nemesis.chosen_faults("fleet", None, _no_server)  # the soak's own database
    # control: named, a shared fault is used
    assert _faults_a_soak_uses(monkeypatch, "embedded", ["kill_api", "restart_libvirtd"]) == [
        "kill_api",
        "restart_libvirtd",
    ]
    with pytest.raises(ValueError, match="not in mode embedded"):
        nemesis.chosen_faults("embedded", ["restart_postgres"], _no_server)


@pytest.mark.postgres
def test_restarting_a_cluster_that_is_not_the_soaks_own_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    shared = nemesis.server_cluster(POSTGRES_URL)  # the cluster every checkout's suite shares
    with pytest.raises(ValueError, match="cleanroom-soak-cluster"):
        nemesis.own_cluster(shared)
    monkeypatch.setenv("CLEANROOM_BENCH_POSTGRES_URL", POSTGRES_URL)

    def deployed():
        raise AssertionError("refused before anything is deployed")

    monkeypatch.setitem(runner.MODES, "fleet", deployed)
    with pytest.raises(ValueError, match="soak's own"):
        runner.soak(1, 1, "fleet", ["kill_api", "restart_postgres"], progress=lambda line: None)

    restarted: list[list[str]] = []
    monkeypatch.setattr(nemesis.subprocess, "run", lambda args, **kw: restarted.append(args))
    dep = FleetDeployment.__new__(FleetDeployment)  # the fault at strike time checks again
    dep.env = {"DATABASE_URL": POSTGRES_URL}
    with pytest.raises(ValueError, match="soak's own"):
        nemesis.restart_postgres(dep, random.Random(1))
    assert restarted == []


def test_the_soaks_own_cluster_is_accepted_and_restarted_by_its_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    own = {"data_directory": str(tmp_path), "cluster_name": "15/soak"}
    with pytest.raises(ValueError):
        nemesis.own_cluster(own)  # unmarked: not yet
    (tmp_path / nemesis.OWN_CLUSTER_MARKER).touch()
    assert nemesis.own_cluster(own) == ("15", "soak")
    monkeypatch.setattr(nemesis, "server_cluster", lambda url: own)
    assert nemesis.chosen_faults("fleet", ["restart_postgres"], lambda: "postgresql://soak") == [
        "restart_postgres"
    ]
    restarted: list[list[str]] = []

    class Done:
        returncode, stderr = 0, ""

    monkeypatch.setattr(nemesis.subprocess, "run", lambda args, **kw: restarted.append(args) or Done())
    dep = FleetDeployment.__new__(FleetDeployment)
    dep.env = {"DATABASE_URL": "postgresql://soak"}
    assert "15/soak restarted" in nemesis.restart_postgres(dep, random.Random(1))
    assert restarted == [["pg_ctlcluster", "15", "soak", "restart", "-m", "fast"]]
