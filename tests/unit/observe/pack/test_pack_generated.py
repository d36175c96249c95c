"""The committed pack (deploy/prometheus, deploy/grafana, deploy/k8s/monitoring) is exactly
what the generator produces now, and ``eagle-eye rules`` writes and checks it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from eagle_eye.observe.pack.render import render_all
from eagle_eye.observe.rules_cli import rules
from support import REPO_ROOT

ROOT = REPO_ROOT


def test_committed_files_equal_the_generator_output() -> None:
    stale = [
        rel
        for rel, text in render_all().items()
        if not (ROOT / rel).is_file() or (ROOT / rel).read_text() != text
    ]
    assert stale == [], f"regenerate with `eagle-eye rules`: {stale}"


def test_no_orphan_generated_files_are_left_behind() -> None:
    generated = set(render_all())
    for folder in ("deploy/prometheus", "deploy/grafana", "deploy/k8s/monitoring"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert str(path.relative_to(ROOT)) in generated, f"not generated: {path}"


def test_rules_command_writes_then_checks_clean(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(rules, ["--out", str(tmp_path)])
    assert first.exit_code == 0, first.output
    assert (tmp_path / "deploy/prometheus/eagle-eye-rules.yaml").is_file()
    check = runner.invoke(rules, ["--out", str(tmp_path), "--check"])
    assert check.exit_code == 0, check.output
    (tmp_path / "deploy/grafana/eagle-eye-fleet.json").write_text("{}")
    stale = runner.invoke(rules, ["--out", str(tmp_path), "--check"])
    assert stale.exit_code == 1
    assert "deploy/grafana/eagle-eye-fleet.json" in stale.output


def test_release_label_is_configurable(tmp_path: Path) -> None:
    result = CliRunner().invoke(rules, ["--out", str(tmp_path), "--release", "kps"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "deploy/k8s/monitoring/podmonitors.yaml").read_text()
    assert "release: kps" in text
    assert "release: prometheus" not in text
