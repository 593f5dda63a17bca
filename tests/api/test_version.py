"""One version, from the installed package: `cleanroom --version`, the OpenAPI document's `info.version`, and
CHANGELOG.md, whose releases each name a commit this repository holds (the OpenAPI document's is checked on
the schema tests/test_api_docs.py builds once)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib.metadata import version

from typer.testing import CliRunner

from backend.cli import app
from backend.settings import REPO_ROOT
from backend.version import VERSION

RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2}), commit ([0-9a-f]{40})$", re.MULTILINE)


def test_the_cli_prints_the_installed_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"cleanroom {version('cleanroom')}\n"
    assert version("cleanroom") == VERSION


def test_the_changelog_names_each_release_by_a_commit_this_repository_holds() -> None:
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    releases = RELEASE.findall(text)
    assert releases, "CHANGELOG.md names no release"
    assert ("0.1.0", "2026-12-06", "27aea025fb65c19f774209e05f587407473045b9") in releases
    for _, _, commit in releases:
        kind = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "cat-file", "-t", commit], capture_output=True, text=True
        )
        assert kind.stdout.strip() == "commit", f"{commit}: {kind.stderr}"
    # the source's version is the newest release, or after it (a .dev of the next)
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    newest = max(tuple(int(p) for p in v.split(".")) for v, _, _ in releases)
    mine = tuple(int(p) for p in declared.split(".dev")[0].split("."))
    assert mine > newest or (mine == newest and ".dev" not in declared)
