"""Drive vLLM's own stat-logger machinery with our plugin, without starting an engine.

Run with the vLLM venv's python. ``StatLoggerManager`` is what ``AsyncLLM`` builds from
its ``stat_loggers=[...]`` argument plus the ``vllm.stat_logger_plugins`` entry points,
so this exercises both ways in on a real ``VllmConfig``, with real stats objects, in
seconds instead of a 30-90 s engine start (and vLLM's import once for three cases).

    python logger_paths_script.py NATS_URL

Phases, each announced by a ``PHASE name`` line and ended by a ``RESULT {json}`` line:
``no-url`` and ``bad-url`` (entry-point discovery; no or a malformed EAGLE_EYE_NATS_URL),
then ``explicit`` (``stat_loggers=[EagleEyeStatLogger]`` with vLLM's plugins disabled,
publishing to NATS_URL), then ``data-parallel`` (two engines behind one API server,
through sleep and wake).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_PHASE_ENV = {
    "no-url": {},
    "bad-url": {"EAGLE_EYE_NATS_URL": "http://nats:4222"},
    "explicit": {
        "VLLM_PLUGINS": "eagle_eye_plugins_disabled",
        "EAGLE_EYE_INSTANCE_ID": "explicit-stat-loggers",
    },
    "data-parallel": {
        "VLLM_PLUGINS": "eagle_eye_plugins_disabled",
        "EAGLE_EYE_INSTANCE_ID": "dp-stat-loggers",
    },
}
DP_BLOCKS_PER_ENGINE = 1000
"""The data-parallel phase's KV blocks per engine (vLLM's API server holds the sum)."""


def main(nats_url: str) -> None:
    for phase, env in _PHASE_ENV.items():
        for name in ("VLLM_PLUGINS", "EAGLE_EYE_NATS_URL", "EAGLE_EYE_INSTANCE_ID"):
            os.environ.pop(name, None)
        os.environ.update(env)
        if phase in ("explicit", "data-parallel"):
            os.environ["EAGLE_EYE_NATS_URL"] = nats_url
        print(f"PHASE {phase}", flush=True)
        if phase == "data-parallel":
            run_data_parallel()
        else:
            run_phase(phase)


def run_phase(phase: str) -> None:
    from vllm.v1.metrics.loggers import StatLoggerManager, load_stat_logger_plugin_factories

    from eagle_eye.bench.publisher import busy_step_stats, tiny_vllm_config
    from eagle_eye.publish.vllm_plugin import EagleEyeStatLogger, EngineStatLogger

    with tempfile.TemporaryDirectory() as tmp:
        vllm_config = tiny_vllm_config(Path(tmp))
    factories = load_stat_logger_plugin_factories()
    custom = [EagleEyeStatLogger] if phase == "explicit" else []
    manager = StatLoggerManager(vllm_config, custom_stat_loggers=[*custom, *factories])
    manager.log_engine_initialized()
    for step in range(5):
        manager.record(*busy_step_stats(step), engine_idx=0)
    manager.record_sleep_state(1, 1)
    ours = _engine_loggers(manager, EngineStatLogger)
    result = {
        "phase": phase,
        "plugin_factories": [f"{f.__module__}.{f.__qualname__}" for f in factories],
        "instances": len(ours),
        "publishing": [logger.channel is not None for logger in ours],
        "record_errors": sum(logger.errors for logger in ours),
    }
    if phase == "explicit" and ours and ours[0].channel is not None:
        from eagle_eye.publish.vllm_plugin import shared_publisher
        from eagle_eye.settings import publisher_from_env

        publisher = shared_publisher(publisher_from_env())  # the one the plugin uses
        result["connected"] = publisher.wait_connected(10.0)
        publisher.close()
        result["sent"] = publisher.stats.sent
    sys.stderr.flush()
    print("RESULT " + json.dumps(result), flush=True)


def run_data_parallel() -> None:
    """Two data-parallel engines behind one API server, as vLLM configures it (blocks
    summed over the engines), through sleep and wake."""
    from vllm.v1.metrics.loggers import StatLoggerManager

    from eagle_eye.bench.publisher import busy_step_stats, tiny_vllm_config
    from eagle_eye.publish.vllm_plugin import EagleEyeStatLogger, EngineStatLogger

    with tempfile.TemporaryDirectory() as tmp:
        vllm_config = tiny_vllm_config(Path(tmp))
    vllm_config.parallel_config.data_parallel_size = 2
    vllm_config.parallel_config.data_parallel_size_local = 2
    vllm_config.cache_config.num_gpu_blocks = 2 * DP_BLOCKS_PER_ENGINE
    manager = StatLoggerManager(
        vllm_config, engine_idxs=[0, 1], custom_stat_loggers=[EagleEyeStatLogger]
    )
    manager.log_engine_initialized()
    for step in range(3):
        for engine in (0, 1):
            manager.record(*busy_step_stats(step, running=4 + engine), engine_idx=engine)
    ours = _engine_loggers(manager, EngineStatLogger)
    sent = _sent_all(ours)
    manager.record_sleep_state(1, 1)
    slept = _sent_all(ours)
    manager.record_sleep_state(0, 1)
    woke = _sent_all(ours)
    from eagle_eye.publish.vllm_plugin import shared_publisher
    from eagle_eye.settings import publisher_from_env

    shared_publisher(publisher_from_env()).close()
    result = {
        "phase": "data-parallel",
        "instances": len(ours),
        "dp_ranks": [logger.engine_index for logger in ours],
        "block_size": vllm_config.cache_config.block_size,
        "blocks_per_engine": DP_BLOCKS_PER_ENGINE,
        "sent_before_sleep": sent,
        "sent_after_sleep": slept,
        "sent_after_wake": woke,
        "record_errors": sum(logger.errors for logger in ours),
    }
    print("RESULT " + json.dumps(result), flush=True)


def _sent_all(loggers: list[Any], timeout_s: float = 10.0) -> bool:
    """Wait (with a deadline) until every logger's newest state has gone out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(logger.channel is not None and not logger.channel._unsent for logger in loggers):
            return True
        time.sleep(0.01)  # a script polling a background thread's progress
    return False


def _engine_loggers(manager: Any, engine_logger: type) -> list[Any]:
    """Our per-engine loggers, whether vLLM holds them in our aggregate logger
    (``engines``) or in its own per-engine wrapper (``per_engine_stat_loggers``)."""
    found = []
    for logger in manager.stat_loggers:
        inner = getattr(logger, "engines", None) or getattr(logger, "per_engine_stat_loggers", {})
        found += [e for e in inner.values() if isinstance(e, engine_logger)]
    return found


if __name__ == "__main__":
    main(sys.argv[1])
