"""``eagle-eye k8s bundle`` on small local wheels (no network)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from eagle_eye.cli import main


def test_cli_fails_offline_with_what_to_do(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, _ = wheels
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["k8s", "bundle", "--out", str(tmp_path / "out"), "--wheel", str(wheel)]
    result = CliRunner().invoke(main, [*args, "--find-links", str(empty), "--no-index"])
    assert result.exit_code == 1
    assert "could not download the engine-side dependency wheels" in result.output
    assert "is this machine offline?" in result.output
    assert "--find-links wheels/ --no-index" in result.output
    assert not (tmp_path / "out" / "source_code.tar.gz").exists()


def test_cli_prints_the_configmap_commands(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, deps = wheels
    out = tmp_path / "out"
    args = ["k8s", "bundle", "--out", str(out), "--wheel", str(wheel), "--no-index"]
    result = CliRunner().invoke(main, [*args, "--find-links", str(deps)])
    assert result.exit_code == 0, result.output
    assert (
        "kubectl create configmap vllm-source-code "
        f"--from-file=source_code.tar.gz={out / 'source_code.tar.gz'} -n ai-inference"
    ) in result.output
