"""The benchmarks, in one place outside the packages that serve requests, and their registry: `cleanroom bench`
runs every registered suite, `cleanroom bench NAME` runs one.

A suite is a function taking no arguments and returning a JSON-able dict of figures
(medians/p95 in milliseconds, with the sample count). The CLI modules call `add_suite` from their `register` hook.
This module holds the registry and what the suites share (`summarize`, `ratio`, `ApiServer`, `sales_csv`, host
python timings); each suite is a module named by what it measures: `scanner` (the injection scanner's
throughput), `scan_cache` (a proposal's scan with the verdict cache), `convert` (the converter sandbox's cost), `staging`, `service` (the run loop), `flows`, `sandbox`
(VM start and run), `hangs` (guests that go silent), `workers` (the fleet), `control_plane` (one API process
under many assistants and hosts) and `mcp` (MCP against plain HTTP). `cleanroom bench injection` (recall and
false positives) is the injection training harness's evaluation.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from backend.localhost import free_port

SUITES: dict[str, Callable[[], dict[str, Any]]] = {}


def add_suite(bench_app: typer.Typer, name: str, fn: Callable[[], dict[str, Any]], help: str) -> None:
    """Register a suite: it runs under `cleanroom bench` and alone as `cleanroom bench NAME`."""
    SUITES[name] = fn

    @bench_app.command(name, help=help)
    def _run_one(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
        run_suites([name], json_out)


def summarize(samples_ms: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples_ms)
    p95_index = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[p95_index], 1),
        "min": round(ordered[0], 1),
        "n": len(ordered),
    }


def _print(name: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        return
    typer.echo(f"== {name}")
    for key, value in result.items():
        typer.echo(f"  {key}: {json.dumps(value)}")


def run_suites(names: list[str], as_json: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        if not as_json:
            typer.echo(f"running {name} …", err=True)
        try:
            results[name] = SUITES[name]()
        except Exception as exc:  # noqa: BLE001 - one suite that cannot run here must not lose the others
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        _print(name, results[name], as_json)
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    return results


def ratio(value: float, baseline: float) -> float | None:
    """`value` as a multiple of `baseline` (the cost of isolation against the bare host), 2 decimals."""
    return round(value / baseline, 2) if baseline > 0 else None


_SEEDED: dict[tuple[tuple[str, str], ...], Path] = {}  # what `seed_demo` seeded in this process, by setting


def seed_demo(root: Path, env: dict[str, str]) -> None:
    """`root` as `cleanroom demo seed` leaves a data directory (SQLite database, Drive blobs, audit anchor),
    for a server started with `env`. The seed runs once per process and settings (3-6 s); later calls copy
    its folder, which names neither its path nor a port (they are found from the environment)."""
    settings = tuple(
        sorted(
            (k, v)
            for k, v in env.items()
            if k.startswith("CLEANROOM_") and not k.endswith(("_DATA_DIR", "_PORT", "_URL", "_WORKER_PARENT"))
        )
    )
    from backend.settings import REPO_ROOT

    seeded = _SEEDED.get(settings)
    if seeded is None:
        seeded = Path(tempfile.mkdtemp(prefix="cleanroom-seeded-"))
        atexit.register(shutil.rmtree, seeded, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "backend", "demo", "seed"],
            env={
                **env,
                "CLEANROOM_DATA_DIR": str(seeded),
                "DATABASE_URL": f"sqlite:///{seeded / 'cleanroom.sqlite3'}",
            },
            cwd=REPO_ROOT,
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
        )
        _SEEDED[settings] = seeded
    shutil.copytree(seeded, root, symlinks=True, dirs_exist_ok=True)


class ApiServer:
    """The real API (`cleanroom serve --no-console`, with its in-process worker running real VMs) on a freshly
    seeded demo SQLite database in a temporary folder, on a free port. `env` adds or overrides settings;
    `processes` above 1 serves with that many API processes (`serve --processes`, PostgreSQL only); `seeded`:
    the database named in `env` already holds the demo companies (cloned from a seeded template), so the seed,
    which would find them and do nothing, is not started."""

    def __init__(self, env: dict[str, str] | None = None, processes: int = 1, seeded: bool = False) -> None:
        from backend.settings import REPO_ROOT

        self.repo = REPO_ROOT
        self.root = Path(tempfile.mkdtemp(prefix="cleanroom-bench-api-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")},
            "CLEANROOM_DATA_DIR": str(self.root),
            "DATABASE_URL": f"sqlite:///{self.root / 'cleanroom.sqlite3'}",
            "CLEANROOM_API_PORT": str(self.port),
            "CLEANROOM_API_BASE_URL": self.url,
            "PYTHONUNBUFFERED": "1",
            # the seeded demo is a copy (`seed_demo`): a database moved away from its audit anchor, which `serve`
            # refuses unless told to start a new one (backend/audit/anchor.py `start_problem`)
            "CLEANROOM_NEW_ANCHOR": "1",
            **(env or {}),
        }
        self.processes = processes
        self.seeded = seeded
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ApiServer:
        import httpx

        cmd = [sys.executable, "-m", "backend"]
        if self.env["DATABASE_URL"].startswith("sqlite:"):
            seed_demo(self.root, self.env)
        elif not self.seeded:
            subprocess.run(
                [*cmd, "demo", "seed"], env=self.env, cwd=self.repo, check=True, stdout=subprocess.DEVNULL
            )
        log = open(self.root / "api.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [*cmd, "serve", "--no-console", "--processes", str(self.processes)],
            env=self.env,
            cwd=self.repo,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"the API did not start; see {self.root / 'api.log'}")

    def __exit__(self, *_: object) -> None:
        if self.process:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def sales_csv(rows: int = 5000) -> bytes:
    rng = random.Random(7)
    regions = ["north", "south", "east", "west", "central"]
    lines = ["id,region,amount"] + [f"{i},{rng.choice(regions)},{rng.randint(10, 5000)}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


HOST_PYTHON = "/usr/bin/python3"


def host_python() -> str:
    """Debian's python3 (the guest's interpreter) with the guest's own wheels (vm_templates/image/python.lock),
    installed once into a folder of the image cache and put on its path by `host_python_ms`: the bare-host
    baseline runs the same builds as the guest (the product itself never needs them on the host)."""
    site = _host_site()
    probe = [HOST_PYTHON, "-c", "import pandas, matplotlib, seaborn, sklearn"]
    if (
        subprocess.run(probe, capture_output=True, env={**os.environ, "PYTHONPATH": str(site)}).returncode
        != 0
    ):
        from backend.sandbox import guest_python

        print("installing the guest's wheels for the bare-host baseline …", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="cleanroom-bench-wheels-") as tmp:
            files = guest_python.download(guest_python.locked(), Path(tmp) / "wheels", lambda _m: None)
            shutil.rmtree(site, ignore_errors=True)
            guest_python.install(files, Path(tmp) / "root", lambda _m: None)
            shutil.move(Path(tmp) / "root" / guest_python.SITE, site)
    return HOST_PYTHON


def _host_site() -> Path:
    from backend.hashing import sha256_bytes
    from backend.sandbox import guest_python
    from backend.settings import get_settings

    return (
        get_settings().image_cache_dir
        / f"bench-host-site-{sha256_bytes(guest_python.LOCK.read_bytes())[:12]}"
    )


def host_python_ms(code: str, files: dict[str, bytes], runs: int) -> list[float]:
    """The same script as a bare `python3 script.py` on the host (`host_python`): /work/input and
    /work/output become folders in a temporary directory."""
    python, samples = host_python(), []
    with tempfile.TemporaryDirectory(prefix="cleanroom-bench-host-") as root:
        base = Path(root)
        (base / "input").mkdir()
        (base / "output").mkdir()
        for name, data in files.items():
            (base / "input" / name).write_bytes(data)
        script = base / "script.py"
        script.write_text(
            code.replace("/work/input", str(base / "input")).replace("/work/output", str(base / "output"))
        )
        for _ in range(runs):
            started = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": str(_host_site()), "MPLBACKEND": "Agg"}
            subprocess.run([python, str(script)], check=True, stdout=subprocess.DEVNULL, cwd=base, env=env)
            samples.append((time.perf_counter() - started) * 1000)
    return samples
