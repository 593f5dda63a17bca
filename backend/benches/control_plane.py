"""`cleanroom bench control-plane`: one API process under many waiting assistants and many hosts, no VM.

A real `cleanroom serve --no-console` in fleet mode on a fresh PostgreSQL database (`FleetServer`), on loopback,
with `CLEANROOM_BENCH_CP_PROCESSES` API processes (1; `serve --processes`, measured together).
In this process, on one event loop:
- **hosts** (`CLEANROOM_BENCH_CP_HOSTS`, 50): each registers with its own enrollment token and heartbeats every
  `CLEANROOM_BENCH_CP_HEARTBEAT_SECONDS` (5) through the real worker API; one procrastinate worker (the workers'
  database role) takes the jobs of every host's queue and hands each to its host, which claims the run, fetches
  its bundle from the signed URL, checks it, says its VM started and posts a canned result (the real
  `HostAgent` job path with `sandbox.run_code` answering at once);
- **assistants** (`CLEANROOM_BENCH_CP_ASSISTANTS`, 200): each proposes a trivial run and waits for its end, a share
  (`CLEANROOM_BENCH_CP_MCP_SHARE`, 0.25) with MCP `get_run(wait_seconds=30)` over streamable HTTP, the others over
  plain HTTP: a share (`CLEANROOM_BENCH_CP_POLL_SHARE`, 0.5; 1 is how every client waited before the API could
  hold a wait) polls `GET /api/runs/{id}` every second, the others wait with `GET /api/runs/{id}?wait_seconds=25`
  (its own line in the report: its time includes the wait); then each proposes the next, until
  `CLEANROOM_BENCH_CP_SECONDS` (60), after a think of `CLEANROOM_BENCH_CP_THINK_SECONDS` on average (0: at once;
  each assistant is then a closed loop, and at a thousand of them the rate they ask for is whatever the API
  gives, so every latency grows to the number waiting over the rate answered);
- **people** (two sessions): approve what waits, with the hashes the approval screen shows.

First the hosts alone heartbeat for a while (`CLEANROOM_BENCH_CP_QUIET_SECONDS`, a third of the load's seconds
within 5 to 20; the API's CPU spent on heartbeats); then a **backlog**
(`CLEANROOM_BENCH_CP_BACKLOG`, 200 runs proposed and approved before any host takes a job) is worked off, the
dispatcher's own rate: every slot is busy, so each run is handed out only when another's result frees a slot;
then everything runs. Reported
as JSON: p50/p95/p99 per route as the clients saw it, runs dispatched (claimed) per second and whether any run
was claimed twice, the API's RSS, CPU (share of one core, and per waiting assistant), open descriptors and the
database's connections. The bench process shares the machine's cores with the API: its own CPU is reported
too, so read latencies with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import ssl
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from backend.settings import REPO_ROOT, get_settings
from backend.timing import HEADER, app_ms

ROUTE_IDS = re.compile(r"/\d+(?=/|$)")
FINISHED = {"succeeded", "failed", "timed_out", "out_of_memory", "error", "cancelled", "rejected", "skipped"}
PEOPLE = ("maria@acme.example", "alice@acme.example")
TRIVIAL = "print('ok')\n"
APPROVALS_AT_ONCE = 16  # a person's approvals in flight at once
BACKLOG_LIMIT_SECONDS = 300.0  # the backlog is given up on (and reported unfinished) after this


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


class Latencies:
    """Client-side time per route (ids replaced by `{id}`), from request sent to response headers; and the
    API's own, from its Server-Timing header (`backend/timing.py`)."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.in_api: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)

    def hooks(self) -> dict[str, list[Any]]:
        async def sent(request: httpx.Request) -> None:
            request.extensions["bench_t0"] = time.perf_counter()

        async def answered(response: httpx.Response) -> None:
            request = response.request
            route = f"{request.method} {ROUTE_IDS.sub('/{id}', request.url.path)}"
            if "wait_seconds" in request.url.params:  # held until the status moves: its own line
                route += "?wait_seconds"
            self.ms[route].append((time.perf_counter() - request.extensions["bench_t0"]) * 1000)
            in_api = app_ms(response.headers.get(HEADER))
            if in_api is not None:
                self.in_api[route].append(in_api)
            if response.status_code >= 500:
                self.errors[route] += 1

        return {"request": [sent], "response": [answered]}

    def report(self) -> dict[str, Any]:
        out = {}
        for route, values in sorted(self.ms.items()):
            out[route] = _percentiles(values)
            if self.errors.get(route):
                out[route]["5xx"] = self.errors[route]
        return out

    def report_in_api(self) -> dict[str, Any]:
        return {route: _percentiles(values) for route, values in sorted(self.in_api.items())}


def _percentiles(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), **{f"p{q}": _quantile(values, q / 100) for q in (50, 95, 99)}}


def _tree(pid: int) -> list[int]:
    """`pid` and every process under it (`serve --processes N`: the supervisor and its API processes)."""
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        with contextlib.suppress(OSError):
            todo += [int(c) for c in Path(f"/proc/{here}/task/{here}/children").read_text().split()]
    return found


class ProcessSampler:
    """The API's processes from /proc (summed over `serve` and its children): RSS, CPU seconds, open
    descriptors; and the database's connections."""

    def __init__(self, pid: int, database: str, admin_url: str, *, tree: bool = True) -> None:
        self.pid, self.database, self.admin_url, self.tree = pid, database, admin_url, tree
        self.rss_mib: list[float] = []
        self.fds: list[int] = []
        self.connections: list[int] = []

    def _pids(self) -> list[int]:
        return _tree(self.pid) if self.tree else [self.pid]

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self._pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def sample(self) -> None:
        rss, fds = 0.0, 0
        for pid in self._pids():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) / 1024
                fds += len(os.listdir(f"/proc/{pid}/fd"))
        self.rss_mib.append(rss)
        self.fds.append(fds)
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.database,)
            ).fetchone()
        self.connections.append(int(row[0]) if row else 0)

    async def run(self, stop: asyncio.Event, every: float = 1.0) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.sample)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    def report(self) -> dict[str, Any]:
        return {
            "rss_mib_max": round(max(self.rss_mib), 1) if self.rss_mib else None,
            "open_fds_max": max(self.fds) if self.fds else None,
            "db_connections_max": max(self.connections) if self.connections else None,
        }


def _database_counters(admin_url: str, database: str) -> dict[str, int]:
    """What PostgreSQL counted for the database (pg_stat_database) and the server's WAL position (bytes; the
    whole server's, so read it with nothing else writing)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    names = ("transactions", "rows_returned", "rows_fetched", "rows_inserted", "rows_updated", "rows_deleted")
    assert row is not None
    return {**dict(zip(names, (int(v) for v in row[:6]), strict=True)), "wal_bytes": int(row[6])}


def _per_run(before: dict[str, int], after: dict[str, int], runs: int) -> dict[str, float]:
    return {name: round((after[name] - before[name]) / runs, 1) for name in before} if runs else {}


def _enroll(env: dict[str, str], hosts: list[str]) -> dict[str, str]:
    """One enrollment token per host, made in one process (the CLI would start one per host)."""
    script = (
        "import asyncio, json, sys\n"
        "from backend.cli.support import run_db\n"
        "from backend.fleet import service\n"
        "async def main():\n"
        "    return {h: await service.enroll(h, created_by='bench') for h in sys.argv[1:]}\n"
        "print(json.dumps(run_db(main, create=False)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *hosts],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


async def _loop_lag(lags: list[float], stop: asyncio.Event, every: float = 0.1) -> None:
    """How late this process's event loop wakes from a `every`-second sleep, in ms: every latency the bench
    reports is timed on this loop, so a loop that is late (the bench itself busy) inflates them all. The
    report carries its p50, p99 and max beside them."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        asked = loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        lags.append(max(0.0, (loop.time() - asked - every) * 1000))


@functools.cache
def _mcp_parts() -> tuple[Any, Any, Any]:
    """The MCP SDK's client, imported once before the measured phase: an import inside it (about a second
    of CPU) held the event loop that times every request."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return httpx2, Client, streamable_http_client


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of the bench. httpx builds a new one for each client it makes
    (certifi's bundle parsed again): 124 ms of this process's event loop each on this machine at load 6, against
    5.5 ms with this one shared. A hundred assistants arriving over the ramp blocked the loop that times
    every request for seconds, and the bench reported that as the API's latency. Nothing here speaks TLS
    (loopback HTTP only); the context is what httpx requires to exist."""
    return ssl.create_default_context()


def _simulated_hosts(api_url: str, tokens: dict[str, str], latencies: Latencies) -> dict[str, Any]:
    """`HostAgent`s whose registration names this machine's image without touching libvirt, and whose VM
    answers at once (the bench process's `sandbox.run_code` is replaced)."""
    from backend import sandbox
    from backend.fleet.host_agent import HostAgent
    from backend.fleet.schemas import HostBody
    from backend.sandbox.image import current_image

    image = current_image()
    image_hash = image.image_hash if image else ""

    def canned(code: str, *, out_dir: Path, **_: Any) -> Any:
        (out_dir / "summary.txt").write_text("bench\n")
        return sandbox.SandboxResult(status="succeeded", exit_code=0, stdout="ok\n")

    sandbox.run_code = (
        canned  # this process only, for the bench's length (`run_control_plane_bench` restores it)
    )

    class SimulatedHost(HostAgent):
        async def register(self) -> None:
            await self.api.register(
                HostBody(libvirt_uri="qemu:///system", virt_type="qemu", image_hash=image_hash, capacity=1)
            )

    hosts = {}
    for host_id, token in tokens.items():
        http = httpx.AsyncClient(base_url=api_url, timeout=120, event_hooks=latencies.hooks(), verify=_tls())
        hosts[host_id] = SimulatedHost(host_id=host_id, api_url=api_url, token=token, capacity=1, http=http)
    return hosts


def _failure(exc: BaseException | None) -> str:
    """A client's failure, with the request it was making when httpx knows it."""
    said = repr(exc)[:300]
    try:
        request = exc.request  # type: ignore[union-attr]
    except (AttributeError, RuntimeError):  # not an httpx error, or one without its request
        return said
    return f"{said} on {request.method} {request.url.path}"


def _trivial(conversation: str, files: list[int]) -> dict[str, Any]:
    """The bench's proposal: the trivial code over the given Drive files, or the deals dataset."""
    return {
        "conversation_id": conversation,
        "title": "trivial",
        "plan": "control-plane bench",
        "code": TRIVIAL,
        **({"files": files} if files else {"datasets": ["deals"]}),
    }


async def _assistant(
    index: int,
    url: str,
    token: str,
    files: list[int],
    mcp: bool,
    stop: asyncio.Event,
    latencies: Latencies,
    counts: dict[str, int],
    poll_share: float,
    arrives: float,
    think: float = 0.0,
) -> None:
    """Propose, wait for the run's end, think, propose again. `think`: the mean of the assistant's own time
    between a run's end and its next proposal (reading the output, writing the next code), drawn
    exponentially per turn so turns do not fall in step; 0 proposes again at once."""
    headers = {"Authorization": f"Bearer {token}"}
    await asyncio.sleep(arrives)  # the assistants arrive over the ramp, not all in one instant
    chance = random.Random(index)
    polls = chance.random() < poll_share  # reads the run every second instead of waiting
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=120, event_hooks=latencies.hooks(), verify=_tls()
    ) as http:
        session = None
        if mcp:
            httpx2, client, streamable_http_client = _mcp_parts()
            http2 = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120), verify=_tls())
            session = client(streamable_http_client(url + "/mcp", http_client=http2))
            await session.__aenter__()
        try:
            while not stop.is_set():
                proposed = await http.post("/api/runs", json=_trivial(f"bench-{index}", files))
                if proposed.status_code != 201:
                    counts[f"proposal_{proposed.status_code}"] += 1
                    await asyncio.sleep(1.0)
                    continue
                counts["proposed"] += 1
                run_id, status = proposed.json()["id"], None
                while not stop.is_set():
                    if session is not None:
                        began = time.perf_counter()
                        result = await session.call_tool("get_run", {"run_id": run_id, "wait_seconds": 30})
                        latencies.ms["MCP get_run(wait_seconds=30)"].append(
                            (time.perf_counter() - began) * 1000
                        )
                        status = (result.structured_content or {}).get("status")
                    elif not polls:  # held by the API until the status moves (one shared query a tick)
                        asked = {"wait_seconds": 25, "seen_status": status or "awaiting_approval"}
                        status = (await http.get(f"/api/runs/{run_id}", params=asked)).json().get("status")
                    else:
                        status = (await http.get(f"/api/runs/{run_id}")).json().get("status")
                    if status in FINISHED:
                        counts[f"ended_{status}"] += 1
                        if think > 0:
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(stop.wait(), chance.expovariate(1 / think))
                        break
                    if session is None and polls:
                        await asyncio.sleep(1.0)
        finally:
            if session is not None:
                with contextlib.suppress(Exception):
                    await session.__aexit__(None, None, None)


async def _person(
    url: str, email: str, stop: asyncio.Event, latencies: Latencies, counts: dict[str, int]
) -> None:
    async with httpx.AsyncClient(
        base_url=url, headers={"Origin": url}, timeout=120, event_hooks=latencies.hooks(), verify=_tls()
    ) as http:
        (await http.post("/api/auth/login", json={"email": email, "password": "demo"})).raise_for_status()
        at_once = asyncio.Semaphore(APPROVALS_AT_ONCE)
        while not stop.is_set():
            waiting = (
                await http.get("/api/runs", params={"status": "awaiting_approval", "limit": 50})
            ).json()

            async def approve(run: dict[str, Any]) -> None:
                async with at_once:
                    hashes = {
                        "code_sha256": run.get("code_sha256"),
                        "bundle_sha256": run.get("bundle_sha256"),
                    }
                    if not all(hashes.values()):
                        run = (await http.get(f"/api/runs/{run['id']}")).json()
                        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
                    answer = await http.post(f"/api/runs/{run['id']}/approve", json=hashes)
                    counts["approved" if answer.status_code == 200 else f"approve_{answer.status_code}"] += 1

            # a page's runs decided together (one after another, a person's two round trips a run were the
            # pace of the whole bench's dispatch: 51 runs in 40 s)
            await asyncio.gather(*(approve(run) for run in waiting.get("items", [])))
            await asyncio.sleep(0.5)


def _slot_use(jobs: dict[str, list[tuple[float, float]]], until: float | None) -> dict[str, Any]:
    """Of the hosts' jobs that ended by `until`: the median job's seconds (claim to result posted), and the
    share of the time between a host's first and last job that its slot (the simulated hosts have one each)
    sat idle between jobs."""
    spans = [sorted(j for j in host_jobs if until is None or j[1] <= until) for host_jobs in jobs.values()]
    lengths = [end - began for host_jobs in spans for began, end in host_jobs]
    idle = sum(b[0] - a[1] for host_jobs in spans for a, b in zip(host_jobs, host_jobs[1:], strict=False))
    if not lengths:
        return {"job_seconds_p50": None, "slot_idle_share": None}
    return {
        "job_seconds_p50": round(sorted(lengths)[len(lengths) // 2], 3),
        "slot_idle_share": round(idle / (idle + sum(lengths)), 3),
    }


def _phase(what: str) -> None:
    """Each phase's start on stderr, so a long bench shows where it is (the JSON report stays on stdout)."""
    print(f"[control-plane {time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def _assistant_and_person(
    url: str, token: str
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A client with the assistant's token, and one signed in as the person who approves its runs."""
    async with (
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120, verify=_tls()
        ) as assistant,
        httpx.AsyncClient(base_url=url, headers={"Origin": url}, timeout=120, verify=_tls()) as person,
    ):
        (
            await person.post("/api/auth/login", json={"email": PEOPLE[0], "password": "demo"})
        ).raise_for_status()
        yield assistant, person


async def _approved_backlog(url: str, token: str, runs: int) -> list[int]:
    """`runs` trivial runs proposed with the assistant's token and approved by the person who owns it, a few at
    a time: queued before any host takes a job."""
    at_once = asyncio.Semaphore(APPROVALS_AT_ONCE)
    async with _assistant_and_person(url, token) as (assistant, person):

        async def one(index: int) -> int:
            async with at_once:
                proposed = await assistant.post("/api/runs", json=_trivial(f"backlog-{index}", []))
                proposed.raise_for_status()
                run = proposed.json()
                hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
                (await person.post(f"/api/runs/{run['id']}/approve", json=hashes)).raise_for_status()
                return run["id"]

        return list(await asyncio.gather(*(one(i) for i in range(runs))))


async def _one_at_a_time(url: str, token: str, sampler: ProcessSampler, n: int) -> dict[str, Any]:
    """What a request costs the API apart from any queueing: its CPU per request (ms) with one request in
    flight at a time, `n` proposals (the deals dataset staged) and then `n` reads of them, and the median
    time each took inside the API (`ms_in_api_p50`, its Server-Timing); a person then rejects them, so no
    later phase sees them. The figures to compare commits by: they move far less from one run to the next
    than the latencies under load."""
    timed: dict[str, list[float]] = defaultdict(list)

    async def answered(response: httpx.Response) -> None:
        in_api, request = app_ms(response.headers.get(HEADER)), response.request
        if in_api is not None:
            timed[f"{request.method} {ROUTE_IDS.sub('/{id}', request.url.path)}"].append(in_api)

    async with _assistant_and_person(url, token) as (assistant, person):
        assistant.event_hooks["response"].append(answered)
        for i in range(min(n, 10)):  # warm: the first requests of a process pay its imports and caches
            (await assistant.get(f"/api/runs?page_size=1&warm={i}")).raise_for_status()
        cpu0 = sampler.cpu_seconds()
        ids = []
        for i in range(n):
            proposed = await assistant.post("/api/runs", json=_trivial(f"one-at-a-time-{i}", []))
            proposed.raise_for_status()
            ids.append(proposed.json()["id"])
        cpu1 = sampler.cpu_seconds()
        for run_id in ids:
            (await assistant.get(f"/api/runs/{run_id}")).raise_for_status()
        cpu2 = sampler.cpu_seconds()
        for run_id in ids:
            (await person.post(f"/api/runs/{run_id}/reject", json={"reason": "bench"})).raise_for_status()
    return {
        "requests": n,
        "POST /api/runs": round(1000 * (cpu1 - cpu0) / n, 2),
        "GET /api/runs/{id}": round(1000 * (cpu2 - cpu1) / n, 2),
        "ms_in_api_p50": {
            route: _quantile(timed[route][-n:], 0.5)
            for route in ("POST /api/runs", "GET /api/runs/{id}")
            if timed[route]
        },
    }


async def _bench(
    fleet: Any,
    assistants: int,
    hosts_n: int,
    seconds: float,
    mcp_share: float,
    poll_share: float,
    ramp: float,
    backlog: int,
    think: float = 0.0,
) -> dict[str, Any]:
    import procrastinate

    from backend.benches.workers import _admin_url
    from backend.fleet.queue import TASK, make_app, queue_of

    assert fleet.server is not None
    url = fleet.url
    latencies, counts = Latencies(), defaultdict(int)
    sampler = ProcessSampler(fleet.server.process.pid, fleet.name, _admin_url())
    own = ProcessSampler(os.getpid(), fleet.name, _admin_url(), tree=False)

    async with httpx.AsyncClient(base_url=url, headers={"Origin": url}, timeout=120, verify=_tls()) as person:
        (
            await person.post("/api/auth/login", json={"email": PEOPLE[0], "password": "demo"})
        ).raise_for_status()
        files: list[int] = []
        if (
            os.environ.get("CLEANROOM_BENCH_CP_STAGE", "dataset") == "file"
        ):  # a converter process per proposal
            upload = await person.post(
                "/api/drive/files", files={"file": ("bench.csv", b"a,b\n1,2\n", "text/csv")}
            )
            upload.raise_for_status()
            files = [upload.json()["id"]]
        tokens = []
        for i in range(min(assistants, 20)):  # assistants share a few tokens, as a company's people would
            made = await person.post("/api/me/tokens", json={"name": f"bench {i}"})
            made.raise_for_status()
            tokens.append(made.json()["token"])

    one_at_a_time = _env_int("CLEANROOM_BENCH_CP_ONE_AT_A_TIME", 100)
    if one_at_a_time:
        _phase(f"one request at a time: {one_at_a_time} proposals, then as many reads")
    api_cpu_ms = await _one_at_a_time(url, tokens[0], sampler, one_at_a_time) if one_at_a_time else None

    host_ids = [f"cp{i:03d}" for i in range(hosts_n)]
    hosts = _simulated_hosts(url, await asyncio.to_thread(_enroll, fleet.server.env, host_ids), latencies)
    by_queue = {queue_of(h): host for h, host in hosts.items()}
    claims: dict[int, list[str]] = defaultdict(list)
    jobs: dict[str, list[tuple[float, float]]] = defaultdict(list)  # host -> (job began, ended)
    ended: dict[int, float] = {}  # run -> when its host had posted its result

    # one procrastinate worker routes the jobs of every simulated host: a role that sees every host's queue,
    # the API's (a real host's own role sees its queue only, `cleanroom workers db-role`)
    app = make_app(fleet.env["DATABASE_URL"], name="cleanroom-bench-control-plane")

    @app.task(name=TASK, pass_context=True)
    async def route(context: procrastinate.JobContext, run_id: int) -> None:
        host = by_queue[context.job.queue]
        claims[run_id].append(host.host_id)
        began = time.monotonic()
        await host.handle(run_id)
        ended.setdefault(run_id, time.monotonic())
        jobs[host.host_id].append((began, time.monotonic()))

    stop_all, background = asyncio.Event(), []
    for host in hosts.values():
        await host.register()
        background.append(asyncio.create_task(host._heartbeats()))
    background.append(asyncio.create_task(sampler.run(stop_all)))

    _mcp_parts()
    # phase 1: the hosts alone
    quiet = float(os.environ.get("CLEANROOM_BENCH_CP_QUIET_SECONDS", min(20.0, max(5.0, seconds / 3))))
    _phase(f"{hosts_n} hosts heartbeat alone for {quiet:.0f} s")
    cpu0, t0 = sampler.cpu_seconds(), time.monotonic()
    await asyncio.sleep(quiet)
    heartbeat_share = (sampler.cpu_seconds() - cpu0) / (time.monotonic() - t0)

    # the backlog: queued and approved before any host takes a job (the dispatcher hands the first slots' worth
    # to the hosts' queues at once, every other run when a result frees a slot)
    if backlog:
        _phase(f"backlog: proposing and approving {backlog} runs")
    backlog_ids = await _approved_backlog(url, tokens[0], backlog) if backlog else []
    if backlog:
        _phase(f"backlog: the hosts take the {backlog} runs")

    stop = asyncio.Event()
    async with app.open_async():
        backlog_began = time.monotonic()
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=list(by_queue), concurrency=min(hosts_n, 50), install_signal_handlers=False, wait=True
            )
        )
        while backlog_ids and time.monotonic() - backlog_began < BACKLOG_LIMIT_SECONDS:
            if all(run_id in ended for run_id in backlog_ids):
                break
            await asyncio.sleep(0.02)
        backlog_done = [ended[run_id] for run_id in backlog_ids if run_id in ended]
        backlog_seconds = (max(backlog_done) - backlog_began) if backlog_done else None
        backlog_slots = _slot_use(jobs, backlog_began + backlog_seconds if backlog_seconds else None)

        # phase 2: everything
        _phase(f"{assistants} assistants, {hosts_n} hosts and {len(PEOPLE)} people for {seconds:.0f} s")
        mcp_n = round(assistants * mcp_share)
        clients = [
            asyncio.create_task(
                _assistant(
                    i,
                    url,
                    tokens[i % len(tokens)],
                    files,
                    i < mcp_n,
                    stop,
                    latencies,
                    counts,
                    poll_share,
                    ramp * i / max(assistants, 1),
                    think,
                )
            )
            for i in range(assistants)
        ]
        # the people keep deciding until the last assistant has its answer: a run left waiting for approval
        # would hold its assistant's wait to the end of its 25-30 s after the bench had stopped
        decided = asyncio.Event()
        people = [asyncio.create_task(_person(url, p, decided, latencies, counts)) for p in PEOPLE]
        lags: list[float] = []
        background.append(asyncio.create_task(_loop_lag(lags, stop)))
        db0 = await asyncio.to_thread(_database_counters, _admin_url(), fleet.name)
        cpu1, own1, t1 = sampler.cpu_seconds(), own.cpu_seconds(), time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - t1
        api_cpu = (sampler.cpu_seconds() - cpu1) / elapsed
        bench_cpu = (own.cpu_seconds() - own1) / elapsed
        db1 = await asyncio.to_thread(_database_counters, _admin_url(), fleet.name)
        stop.set()
        answered = await asyncio.wait(clients, timeout=60)
        decided.set()
        stopped = await asyncio.wait(people, timeout=60)
        done = (answered[0] | stopped[0], answered[1] | stopped[1])
        for task in done[1]:
            task.cancel()
        failures = [_failure(t.exception()) for t in done[0] if not t.cancelled() and t.exception()]
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker
    stop_all.set()
    for task in background:
        task.cancel()
    for host in hosts.values():
        await host.api.aclose()

    claimed = {run_id: who for run_id, who in claims.items()}
    backlog_claims = [claimed.get(run_id, []) for run_id in backlog_ids]
    in_backlog = set(backlog_ids)
    phase_two = {run_id: who for run_id, who in claimed.items() if run_id not in in_backlog}
    return {
        "api_processes": fleet.processes,
        "company_concurrency_cap": int(os.environ.get("CLEANROOM_BENCH_CP_COMPANY_CAP", "0")),
        "http_assistants_polling_every_second": poll_share,
        "staged": "a Drive file (a converter process each)"
        if os.environ.get("CLEANROOM_BENCH_CP_STAGE") == "file"
        else "the deals dataset",
        "arrival_seconds": ramp,
        "think_seconds_mean": think,
        "assistants": assistants,
        "mcp_assistants": mcp_n,
        "hosts": hosts_n,
        "seconds": round(elapsed, 1),
        # as the bench's clients saw them: the API's time, the sockets' and the bench's own lateness (its event
        # loop runs a thousand clients and fifty hosts, `bench_loop_lag_ms`)
        "routes_ms": latencies.report(),
        # as the API timed them (Server-Timing): from the request reaching the app to its answer's headers
        "routes_ms_in_api": latencies.report_in_api(),
        "counts": dict(sorted(counts.items())),
        "proposed_per_second": round(counts["proposed"] / elapsed, 2),
        # the runs of the assistants' phase (the backlog's are below)
        "runs_claimed": len(phase_two),
        "dispatched_per_second": round(len(phase_two) / elapsed, 2),
        "runs_with_more_than_one_job": sum(1 for who in phase_two.values() if len(who) > 1),
        # the dispatcher's own rate: a backlog worked off by hosts whose every slot is busy
        "backlog": {
            "runs": len(backlog_ids),
            "ended": len(backlog_done),
            "seconds": round(backlog_seconds, 2) if backlog_seconds else None,
            "dispatched_per_second": round(len(backlog_done) / backlog_seconds, 2)
            if backlog_seconds
            else None,
            "runs_with_more_than_one_job": sum(1 for who in backlog_claims if len(who) > 1),
            # which side bounds the rate: a slot idle between its jobs waits for the dispatcher and the
            # queue; a job's own seconds are the worker API's claim, bundle, VM start and result
            **backlog_slots,
        },
        "api": {
            "cpu_ms_per_request_one_at_a_time": api_cpu_ms,
            **sampler.report(),
            "cpu_share_of_one_core": round(api_cpu, 3),
            "cpu_share_per_waiting_assistant": round(api_cpu / assistants, 5) if assistants else None,
            "cpu_share_hosts_only_heartbeating": round(heartbeat_share, 3),
        },
        # PostgreSQL's counters over the measured phase, per run that ended (everything the phase did: the
        # proposals, approvals, waits, heartbeats, dispatch and results, divided by the runs that ended)
        "database_per_ended_run": _per_run(
            db0, db1, sum(v for k, v in counts.items() if k.startswith("ended_"))
        ),
        "bench_process_cpu_share_of_one_core": round(bench_cpu, 3),
        # how late the bench's own event loop ran while it timed the requests (see `_loop_lag`)
        "bench_loop_lag_ms": {
            "p50": round(_quantile(lags or [0.0], 0.5), 1),
            "p95": round(_quantile(lags or [0.0], 0.95), 1),
            "p99": round(_quantile(lags or [0.0], 0.99), 1),
            "max": round(max(lags, default=0.0), 1),
        },
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "client_failures": failures[:10],
    }


def run_control_plane_bench(
    assistants: int | None = None,
    hosts: int | None = None,
    seconds: float | None = None,
    template: str | None = None,
    processes: int | None = None,
    backlog: int | None = None,
) -> dict[str, Any]:
    """`template`: a seeded database to clone (the test suite's) instead of seeding a new one; `processes`:
    API processes (`serve --processes`); `backlog`: runs approved before the hosts take jobs."""
    from backend import sandbox
    from backend.benches.workers import FleetServer

    assistants = assistants if assistants is not None else _env_int("CLEANROOM_BENCH_CP_ASSISTANTS", 200)
    hosts = hosts if hosts is not None else _env_int("CLEANROOM_BENCH_CP_HOSTS", 50)
    seconds = seconds if seconds is not None else float(os.environ.get("CLEANROOM_BENCH_CP_SECONDS", 60))
    mcp_share = float(os.environ.get("CLEANROOM_BENCH_CP_MCP_SHARE", 0.25))
    processes = processes if processes is not None else _env_int("CLEANROOM_BENCH_CP_PROCESSES", 1)
    backlog = backlog if backlog is not None else _env_int("CLEANROOM_BENCH_CP_BACKLOG", 200)
    poll_share = float(os.environ.get("CLEANROOM_BENCH_CP_POLL_SHARE", 0.5))
    ramp = float(os.environ.get("CLEANROOM_BENCH_CP_RAMP_SECONDS", min(20.0, seconds / 3)))
    beat = os.environ.get("CLEANROOM_BENCH_CP_HEARTBEAT_SECONDS", "5")
    think = float(os.environ.get("CLEANROOM_BENCH_CP_THINK_SECONDS", 0))
    limits = {
        "CLEANROOM_MAX_PENDING_RUNS_PER_USER": str(
            10 * assistants + 100 + _env_int("CLEANROOM_BENCH_CP_ONE_AT_A_TIME", 100)
        ),
        "CLEANROOM_MAX_PROPOSALS_PER_USER_PER_HOUR": "1000000",
        "CLEANROOM_MAX_PROPOSALS_PER_COMPANY_PER_HOUR": "1000000",
        "CLEANROOM_WORKER_HEARTBEAT_SECONDS": beat,
        "CLEANROOM_SERVER_TIMING": "1",  # the API's own time per request, next to the clients' (`Latencies`)
        # the bench's one company stands for many: the operator's cap on one company's runs in flight (2 by
        # default) would otherwise be the dispatch rate (at most two runs at a time, about one a second)
        "CLEANROOM_COMPANY_CONCURRENCY_CAP": os.environ.get("CLEANROOM_BENCH_CP_COMPANY_CAP", "0"),
    }
    settings, run_code = get_settings(), sandbox.run_code
    kept_beat = settings.worker_heartbeat_seconds
    settings.worker_heartbeat_seconds = float(beat)  # the simulated hosts' own beat
    try:
        with FleetServer(limits, template=template, processes=processes) as fleet:
            fleet.cli("credits", "top-up", "Acme Analytics", "1000000", "--reason", "control-plane bench")
            report = asyncio.run(
                _bench(fleet, assistants, hosts, seconds, mcp_share, poll_share, ramp, backlog, think)
            )
    finally:
        settings.worker_heartbeat_seconds, sandbox.run_code = kept_beat, run_code
    report["goals"] = {
        "waiting_assistants": 1000,
        "p95_ms_get_run_and_proposal": 150,
        "rss_mib": 600,
        "hosts_heartbeating_every_5s": 200,
        "cpu_share_hosts_only_heartbeating": 0.10,
        "dispatched_per_second": 50,
    }
    return report
