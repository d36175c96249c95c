"""``eagle-eye router`` refuses bad routing configuration with one precise message."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_eye.cli import main

_BASE = ["router", "--backend", "http://127.0.0.1:9", "--port", "0"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("profiles:\n  mine:\n    scorers: [{type: queu}]\n", "scorer 0: unknown type 'queu'"),
        ("mine:\n  scorers: []\n", "expected one top-level key 'profiles:"),
        ("profiles: [1, 2]\n", "'profiles' must map names to pipeline specs"),
        ("profiles: {cost: {scorers: []}}\n", "the name of a built-in policy"),
        ("profiles: {a: [\n", "not valid YAML or JSON"),
    ],
)
def test_a_bad_profiles_file_is_a_usage_error_naming_the_flag(
    tmp_path: Path, document: str, message: str
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(document)
    result = CliRunner().invoke(main, [*_BASE, "--profiles", str(path)])
    assert result.exit_code == 2, result.output
    assert "--profiles" in result.output
    assert message in result.output


def test_an_unknown_policy_lists_what_exists(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("profiles:\n  least-kv:\n    scorers: [{type: kv}]\n")
    result = CliRunner().invoke(main, [*_BASE, "--profiles", str(path), "--policy", "fastest"])
    assert result.exit_code == 2, result.output
    assert "unknown policy 'fastest'" in result.output
    assert "least-kv" in result.output and "round_robin" in result.output
