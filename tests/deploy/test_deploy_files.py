"""The files in deploy/ are what they claim: the systemd units pass `systemd-analyze verify` (with this
checkout's executables in place of /opt/cleanroom's), the environment file names every secret setting of
backend/settings.py, and the Caddyfile is valid for Debian's caddy. Each check has its control: a unit with an
unknown key, an environment file missing a secret and a Caddyfile with a bad directive are noticed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backend.settings import REPO_ROOT, Settings

DEPLOY = REPO_ROOT / "deploy"
SECRET = re.compile(r"(secret|token|password$|_key$|database_url)")  # the settings that hold secrets


def _units_with_paths_here(into: Path, extra: dict[str, str] | None = None) -> list[Path]:
    """deploy/systemd's units, /opt/cleanroom/.venv/bin/X pointed at this interpreter's X; the worker's
    template as an instance (`verify` checks instances)."""
    bin_dir = Path(sys.executable).parent
    units = []
    for unit in sorted((DEPLOY / "systemd").iterdir()):
        text = unit.read_text().replace("/opt/cleanroom/.venv/bin/", f"{bin_dir}/")
        name = unit.name.replace("@.", "@local.")
        target = into / name
        target.write_text(text + (extra or {}).get(unit.name, ""))
        units.append(target)
    return units


def _verify(units: list[Path]) -> str:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    noise = ("Failed to read $container", "PR_SET_MM_ARG_START")  # a container's, not the units'
    return "\n".join(
        line for line in (done.stdout + done.stderr).splitlines() if line and not line.startswith(noise)
    )


def test_the_systemd_units_verify(tmp_path: Path) -> None:
    units = _units_with_paths_here(tmp_path)
    assert {u.name for u in units} >= {
        "cleanroom-api.service",
        "cleanroom-console.service",
        "cleanroom-migrate.service",
        "cleanroom-worker@local.service",
        "cleanroom-backup.service",
        "cleanroom-backup.timer",
    }
    assert _verify(units) == ""


def test_positive_control_verify_reports_an_unknown_key_and_a_missing_executable(tmp_path: Path) -> None:
    units = _units_with_paths_here(tmp_path, {"cleanroom-api.service": "Restartt=always\n"})
    (tmp_path / "cleanroom-console.service").write_text(
        (tmp_path / "cleanroom-console.service").read_text().replace(sys.executable, "/nonexistent/python")
    )
    out = _verify(units)
    assert "Unknown key 'Restartt'" in out
    assert "/nonexistent/python" in out


def _named(env_text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#?\s*([A-Z][A-Z0-9_]+)=", env_text, re.MULTILINE)}


def _secret_settings() -> set[str]:
    names = set()
    for field, info in Settings.model_fields.items():
        if SECRET.search(field):
            alias = info.validation_alias
            names.add(alias.choices[0] if alias is not None else f"CLEANROOM_{field.upper()}")
    return names


def _missing(env_text: str) -> set[str]:
    return _secret_settings() - _named(env_text)


def test_the_environment_file_names_every_secret_setting() -> None:
    text = (DEPLOY / "cleanroom.env").read_text()
    assert {
        "DATABASE_URL",
        "CLEANROOM_CONSOLE_FORWARD_SECRET",
        "CLEANROOM_SMTP_PASSWORD",
    } <= _secret_settings()
    assert _missing(text) == set()
    worker = _named((DEPLOY / "worker.env").read_text())
    assert {"CLEANROOM_WORKER_TOKEN", "DATABASE_URL"} <= worker  # the worker host's, not in the API's file
    for name in _named(text):  # and nothing it names is unknown to the settings (a typo is silently ignored)
        known = name in ("DATABASE_URL", "FORWARDED_ALLOW_IPS") or name.removeprefix(
            "CLEANROOM_"
        ).lower() in (Settings.model_fields)
        assert known, f"{name} is not a setting of backend/settings.py"


def test_positive_control_a_secret_left_out_is_noticed() -> None:
    text = (DEPLOY / "cleanroom.env").read_text()
    cut = "\n".join(line for line in text.splitlines() if "METRICS_TOKEN" not in line)
    assert _missing(cut) == {"CLEANROOM_METRICS_TOKEN"}


def _caddy_validate(caddyfile: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("caddy") is None:
        pytest.skip("caddy is not installed (Debian's caddy package; scripts/setup --test installs it)")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLEANROOM_CONSOLE_HOST": "console.example.com",
        "CLEANROOM_API_HOST": "api.example.com",
        "CLEANROOM_TLS": "internal",
        "CLEANROOM_CADDY_LOG": str(tmp_path / "access.log"),
    }
    return subprocess.run(
        ["caddy", "validate", "--adapter", "caddyfile", "--config", str(caddyfile)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_caddyfile_is_valid_and_its_control_is_not(tmp_path: Path) -> None:
    done = _caddy_validate(DEPLOY / "Caddyfile", tmp_path)
    assert done.returncode == 0 and "Valid configuration" in done.stdout + done.stderr, done.stderr
    broken = tmp_path / "Caddyfile"
    broken.write_text((DEPLOY / "Caddyfile").read_text().replace("flush_interval -1", "flush_intervall -1"))
    assert _caddy_validate(broken, tmp_path).returncode != 0
