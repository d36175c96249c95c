"""The fixture the deploy unit tests share: our (fake) wheel and its dependencies."""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_wheel_factory import PLUGIN, make_wheel


@pytest.fixture
def wheels(tmp_path: Path) -> tuple[Path, Path]:
    """Our (fake) wheel and a find-links folder with its two dependencies."""
    own = tmp_path / "own"
    deps = tmp_path / "deps"
    own.mkdir()
    deps.mkdir()
    wheel = make_wheel(
        own,
        "eagle-eye",
        "0.1.0",
        requires=("nats-py<3,>=2.6", "click<9,>=8.1", "aiohttp>=3.9; extra == 'server'"),
        entry_points=f"[vllm.stat_logger_plugins]\neagle_eye = {PLUGIN}\n",
        files={"eagle_eye/__init__.py": "", "eagle_eye/publish/__init__.py": ""},
    )
    make_wheel(deps, "nats-py", "2.16.0", files={"nats/__init__.py": ""})
    make_wheel(deps, "click", "8.5.1")
    return wheel, deps
