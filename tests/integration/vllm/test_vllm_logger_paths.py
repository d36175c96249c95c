"""vLLM's stat-logger machinery with our plugin, on a real ``VllmConfig``, no engine start.

``AsyncLLM(..., stat_loggers=[...])`` and ``vllm serve`` both hand our class to vLLM's
``StatLoggerManager`` (the latter through the ``vllm.stat_logger_plugins`` entry point);
``logger_paths_script.py`` drives that manager directly, once per configuration, in one
process. Broken or missing configuration must cost one clear log line and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest

from eagle_eye import subjects
from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.snapshot import EngineState, Snapshot, decode

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(600)]
SCRIPT = Path(__file__).with_name("logger_paths_script.py")
PLUGIN = "eagle_eye.publish.vllm_plugin.EagleEyeStatLogger"


@dataclass
class Phase:
    result: dict[str, Any]
    output: str
    """Everything the process printed during the phase (vLLM's log lines included)."""

    def eagle_lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if "eagle-eye" in line]


@dataclass
class ScriptRun:
    phases: dict[str, Phase]
    snapshots: list[Snapshot]


@pytest.fixture(scope="module")
def script_run(vllm_python: str) -> ScriptRun:
    async def go() -> ScriptRun:
        with EmbeddedNats() as server:
            nc = await nats.connect(server.url)
            sub = await nc.subscribe(subjects.ROUTING_METRICS)
            await nc.flush()
            try:
                done = await _run_script(vllm_python, server.url)
                snapshots = []
                while True:
                    try:
                        snapshots.append(decode((await sub.next_msg(timeout=1.0)).data))
                    except nats.errors.TimeoutError:
                        break
            finally:
                await nc.close()
        return ScriptRun(_split_phases(done), snapshots)

    return asyncio.run(go())


async def _run_script(vllm_python: str, nats_url: str) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EAGLE_EYE_", "VLLM_"))}
    done = await asyncio.to_thread(
        subprocess.run,
        [vllm_python, str(SCRIPT), nats_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
        env={**base, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    return done.stdout


def _split_phases(output: str) -> dict[str, Phase]:
    phases: dict[str, Phase] = {}
    name, lines = None, []
    for line in output.splitlines():
        if line.startswith("PHASE "):
            name, lines = line.removeprefix("PHASE "), []
        elif line.startswith("RESULT ") and name is not None:
            phases[name] = Phase(json.loads(line.removeprefix("RESULT ")), "\n".join(lines))
        else:
            lines.append(line)
    return phases


def test_without_a_nats_url_the_plugin_says_so_once_and_vllm_records_on(
    script_run: ScriptRun,
) -> None:
    phase = script_run.phases["no-url"]
    assert phase.result["plugin_factories"] == [PLUGIN]
    assert phase.result["instances"] == 1 and phase.result["publishing"] == [False]
    assert phase.result["record_errors"] == 0
    lines = phase.eagle_lines()
    assert len(lines) == 1, lines
    assert "EAGLE_EYE_NATS_URL is not set; the stat logger is inert" in lines[0]
    assert re.search(r"\bINFO\b", lines[0]), lines  # in vLLM's own log stream and format


def test_a_malformed_nats_url_costs_one_clear_line(script_run: ScriptRun) -> None:
    phase = script_run.phases["bad-url"]
    assert phase.result["publishing"] == [False] and phase.result["record_errors"] == 0
    lines = phase.eagle_lines()
    assert len(lines) == 1, lines
    assert "not publishing: EAGLE_EYE_NATS_URL='http://nats:4222' is not a NATS URL" in lines[0]
    assert "Traceback" not in phase.output


def test_explicit_stat_loggers_argument_publishes(script_run: ScriptRun) -> None:
    phase = script_run.phases["explicit"]
    # vLLM's plugins are disabled (VLLM_PLUGINS): only the class passed in stat_loggers.
    assert phase.result["plugin_factories"] == []
    assert phase.result["instances"] == 1 and phase.result["publishing"] == [True]
    assert phase.result["connected"] is True and phase.result["record_errors"] == 0
    # Only the phases with a NATS URL published (no-url and bad-url sent nothing).
    assert {s.instance_id for s in script_run.snapshots} == {
        "explicit-stat-loggers",
        "dp-stat-loggers",
    }
    snapshots = [s for s in script_run.snapshots if s.instance_id == "explicit-stat-loggers"]
    assert snapshots
    busy = [s for s in snapshots if s.running]
    assert busy[-1].running == 32 and busy[-1].waiting == 6 + 1  # deferred ones included
    assert busy[-1].kv_usage == 0.63 and busy[-1].model == "tiny-llama"
    assert snapshots[-1].state is EngineState.STOPPING


def test_data_parallel_ranks_publish_their_own_capacity_and_sleep_state(
    script_run: ScriptRun,
) -> None:
    phase = script_run.phases["data-parallel"]
    result = phase.result
    assert result["instances"] == 2 and result["dp_ranks"] == [0, 1]
    assert result["record_errors"] == 0
    assert result["sent_before_sleep"] and result["sent_after_sleep"] and result["sent_after_wake"]
    ours = [s for s in script_run.snapshots if s.instance_id == "dp-stat-loggers"]
    per_engine = result["blocks_per_engine"] * result["block_size"]
    for rank in (0, 1):
        rank_snapshots = [s for s in ours if s.dp_rank == rank]
        # Each rank advertises its own engine's capacity, not the API server's sum.
        assert {
            s.kv_capacity_tokens for s in rank_snapshots if s.state is not EngineState.LOADING
        } == {per_engine}
        assert max(s.running for s in rank_snapshots) == 4 + rank
        states = [s.state for s in rank_snapshots]
        # vLLM's sleep and wake reach each engine's logger (its per-engine wrapper would
        # drop them): ready, then draining while asleep, then ready again.
        assert EngineState.DRAINING in states
        asleep = states.index(EngineState.DRAINING)
        assert EngineState.READY in states[:asleep] and EngineState.READY in states[asleep:]
