"""The committed rules pass ``promtool check rules`` and ``promtool test rules``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from support import REPO_ROOT

ROOT = REPO_ROOT
PROM_DIR = ROOT / "deploy/prometheus"

pytestmark = pytest.mark.prometheus


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool missing: scripts/setup.sh --system installs Debian's prometheus"
    return subprocess.run(
        [binary, *args], cwd=PROM_DIR, capture_output=True, text=True, timeout=120, check=False
    )


def test_rule_files_pass_promtool_check() -> None:
    result = _promtool("check", "rules", "eagle-eye-rules.yaml", "eagle-eye-alerts.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_and_recording_unit_tests_pass() -> None:
    tests = sorted(str(p.relative_to(PROM_DIR)) for p in (PROM_DIR / "tests").glob("*.yaml"))
    assert tests == ["tests/alerts.test.yaml", "tests/recording.test.yaml"]
    result = _promtool("test", "rules", *tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_threshold_makes_promtool_fail(tmp_path: Path) -> None:
    """The cases really assert: raise one alert's threshold and its firing case fails."""
    work = tmp_path / "prometheus"
    shutil.copytree(PROM_DIR, work)
    suite = yaml.safe_load((work / "tests/alerts.test.yaml").read_text())
    suite["tests"] = [
        t for t in suite["tests"] if t["alert_rule_test"][0]["alertname"] == "EagleEyeQueueBuildUp"
    ]
    assert len(suite["tests"]) == 2
    (work / "tests/alerts.test.yaml").write_text(yaml.safe_dump(suite))
    alerts = work / "eagle-eye-alerts.yaml"
    text = alerts.read_text()
    assert "eagle_eye:requests_waiting > 20" in text
    alerts.write_text(
        text.replace("eagle_eye:requests_waiting > 20", "eagle_eye:requests_waiting > 2000")
    )
    result = subprocess.run(
        ["promtool", "test", "rules", "tests/alerts.test.yaml"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "EagleEyeQueueBuildUp" in result.stdout + result.stderr
