"""deploy/prometheus and deploy/grafana: the alert rules pass `promtool check rules`, their unit tests
(`promtool test rules`: each alert fires on its series and stays quiet on its control) pass, the scrape
configuration passes `promtool check config`, and every metric the rules and the dashboard name is one the
API's /metrics really serves (a scrape of the test app). Controls: a rule file with a broken expression
fails the check, and a weakened alert fails its unit test, so the checks read what they are given.

promtool comes from Debian's `prometheus` package (scripts/setup --test installs it); without it these tests
fail rather than skip, as CI must run them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.audit import service as audit
from tests.fleet.test_metrics import metrics_token  # noqa: F401 - an autouse fixture: metrics served
from tests.support.metrics import scrape_text

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "cleanroom-dashboard.json"
RULES = PROMETHEUS / "cleanroom-rules.yml"
RULE_TESTS = PROMETHEUS / "cleanroom-rules.test.yml"
NAME = re.compile(r"\b(?:cleanroom|process|python)_[a-z0-9_]+\b")


def promtool(*args: str | Path, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    assert tool, (
        "promtool is missing: `scripts/setup --test` installs Debian's prometheus package, which has it"
    )
    return subprocess.run([tool, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_alert_rules_pass_promtool_and_their_unit_tests(tmp_path: Path) -> None:
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 8 rules found" in checked.stdout
    tested = promtool("test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr

    # controls: a broken expression is refused; a weakened alert (the pool at 99 %, not 90 %) fails its test
    broken = tmp_path / "cleanroom-rules.yml"
    broken.write_text(RULES.read_text().replace("cleanroom_worker_up == 0", "cleanroom_worker_up == == 0"))
    assert promtool("check", "rules", broken, cwd=tmp_path).returncode != 0
    weakened = RULES.read_text().replace("> 0.9\n", "> 0.99\n")
    assert weakened != RULES.read_text()
    broken.write_text(weakened)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    failed = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert failed.returncode != 0 and "CleanroomPoolNearlySpent" in failed.stdout + failed.stderr


def test_the_scrape_configuration_passes_promtool(tmp_path: Path) -> None:
    token = tmp_path / "cleanroom-metrics-token"
    token.write_text("a-token\n")
    config = (PROMETHEUS / "prometheus.yml").read_text()
    assert "/etc/prometheus/cleanroom-metrics-token" in config
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/etc/prometheus/cleanroom-metrics-token", str(token))
    )
    shutil.copy(RULES, tmp_path / RULES.name)
    checked = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def named_in(text: str) -> set[str]:
    return set(NAME.findall(text))


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]


@pytest.mark.sqlite
async def test_every_metric_the_rules_and_dashboard_name_is_served(client) -> None:
    await audit.verify()  # the last verify's gauges exist once it ran
    assert (await client.get("/api/health")).status_code == 200  # a request: the per-route series exist
    served: set[str] = set()
    for family in text_string_to_metric_families(await scrape_text(client)):
        served.add(family.name)
        if family.type == "counter":
            served.add(f"{family.name}_total")
        if family.type == "histogram":
            served |= {f"{family.name}_{part}" for part in ("bucket", "count", "sum")}
        served |= {sample.name for sample in family.samples}

    in_rules = named_in(RULES.read_text())
    in_board = named_in(" ".join(dashboard_queries()))
    assert len(in_rules) >= 8 and len(in_board) >= 20  # the pattern finds names at all
    assert in_rules - served == set()
    assert in_board - served == set()
    assert named_in(RULE_TESTS.read_text()) - served == set()  # the unit tests feed real series
    # control: a name the app does not serve would be caught
    assert {"cleanroom_queue_age_seconds"} - served == {"cleanroom_queue_age_seconds"}
