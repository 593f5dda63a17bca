"""`cleanroom` starts at once: a command imports what it uses when it runs, so `--help` and the sandbox's
commands never load the web stack, the ORM, the console or the scanner. Each probe is a fresh interpreter
(this test process has long imported all of them) that reports what it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

# what no help text and no sandbox command needs: the web stack, the ORM, the console, the charting and data
# libraries, Rich's help renderer; and our own modules that load those or compile the scanner's patterns
HEAVY_PACKAGES = {"litestar", "piccolo", "nicegui", "plotly", "pandas", "rich"}
HEAVY_MODULES = ("backend.app", "backend.db", "backend.errors", "backend.injection", "backend.tenancy")

PROBE = """
import json, sys
from typer.testing import CliRunner
import typer.main
{before}
from backend.cli import app

def paths(command, prefix):
    yield prefix
    for name, sub in sorted(getattr(command, "commands", {{}}).items()):
        yield from paths(sub, [*prefix, name])

runner = CliRunner()
argvs = {argvs}
if argvs is None:  # every command and group, from the top
    argvs = [[*p, "--help"] for p in paths(typer.main.get_command(app), [])]
results = [(argv, runner.invoke(app, argv)) for argv in argvs]
{after}
heavy = {heavy_packages!r}
print(json.dumps({{
    "runs": [[argv, r.exit_code, r.output] for argv, r in results],
    "heavy": sorted(m for m in sys.modules
                    if m.split(".")[0] in heavy or m.startswith({heavy_modules!r})),
}}))
"""


def probe(argvs: list[list[str]] | None, *, before: str = "", after: str = "") -> dict:
    code = PROBE.format(
        before=before,
        after=after,
        argvs=json.dumps(argvs) if argvs is not None else "None",
        heavy_packages=HEAVY_PACKAGES,
        heavy_modules=HEAVY_MODULES,
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_commands_help_works_and_loads_nothing_heavy() -> None:
    """Every help in one interpreter, so nothing heavy after all of them means nothing heavy after any one
    (imports only add): `--help`, `sandbox exec --help` and `bench --help` had a probe each as well."""
    out = probe(None)
    shown = {" ".join(argv[:-1]) for argv, _, _ in out["runs"]}
    # the groups and commands of every module in backend.cli.register's list are reached
    assert {"", "bench", "bench sandbox", "bench staging", "sandbox exec", "image build", "serve"} <= shown
    assert {"records", "stage", "scan", "audit verify", "drive put", "demo seed", "health", "mcp"} <= shown
    failed = [(argv, code, text) for argv, code, text in out["runs"] if code != 0 or "Usage: " not in text]
    assert failed == []
    assert out["heavy"] == []


def test_the_sandbox_exec_path_loads_no_web_stack_or_database() -> None:
    """What `cleanroom sandbox exec FILE` imports to run FILE (the sandbox package and its settings)."""
    out = probe([], after="import backend.sandbox; from backend.sandbox import RunLimits, run_code")
    assert out["heavy"] == []


def test_positive_control_the_probe_sees_the_web_stack_once_the_app_is_imported() -> None:
    out = probe([["--help"]], before="import backend.app")
    assert {"litestar", "piccolo", "backend.app", "backend.db"} <= set(out["heavy"])
